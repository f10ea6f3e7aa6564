"""draq's admission webhooks: the shell around `admission.core.gating`.

- `certificates`: CA and serving certificates (cryptography); `tls`: the swappable SSL context and
  the watcher for externally provided files; `rotation`: the CA Secret and serving-cert renewal.
- `cache`: list+watch of the few objects the decisions read; `kube_api`: the JSON API client.
- `configurations`: the webhook configurations (also printed as manifests); `publisher` keeps
  them current in the cluster.
- `handlers` and `server`: aiohttp over TLS; `service`: everything started and stopped together.
"""
