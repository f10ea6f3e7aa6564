"""A real local Kubernetes control plane and simulated GPU nodes, for draq's tests and demo."""
