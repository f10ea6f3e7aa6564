"""draq's one client layer: the API client and credentials, validated API paths, the table of
resources, list+watch reflectors and the injected clock. The operator and the webhooks build on it."""
