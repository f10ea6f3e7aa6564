"""The local-cluster kit: a real Kubernetes control plane on 127.0.0.1 (etcd, kube-apiserver,
kube-scheduler, kube-controller-manager built from the Go module proxy) and simulated GPU nodes.

`draq demo` and the end-to-end tests run on it. The kit plays the cluster's own parts (an admin
installing objects, kubelets, DRA drivers), not draq, so it talks to the API with the `kubernetes`
package's synchronous client; draq itself only uses `admission.kube`.
"""
