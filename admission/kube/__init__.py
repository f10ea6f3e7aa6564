"""Talking to the Kubernetes API: clients, list+watch caches."""
