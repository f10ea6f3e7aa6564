"""draq's admission webhooks: the shell around the decisions of `admission.core.review`, on the client
layer `admission.kube`.

- `certificates`: CA and serving certificates (cryptography); `tls`: the swappable SSL context and
  the watcher for externally provided files; `rotation`: the CA Secret and serving-cert renewal.
- `cache`: list+watch (the reflectors of `admission.kube`) of the few objects the decisions read.
- `configurations`: the webhook configurations (also printed as manifests); `publisher` keeps
  them current in the cluster.
- `handlers` and `server`: aiohttp over TLS; `service`: everything started and stopped together.
"""
