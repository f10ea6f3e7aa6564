"""draq: queue quotas and gang admission for Kubernetes DRA devices."""

__version__ = "0.1.0"
