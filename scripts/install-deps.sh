#!/usr/bin/env bash
# System packages the local control plane needs: etcd (Debian's etcd-server) and a Go toolchain.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v etcd >/dev/null 2>&1; then
  echo "installing etcd (Debian package etcd-server) ..."
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
  # The package starts a system etcd on 2379 where an init system runs; the control plane uses its own.
  as_root systemctl disable --now etcd >/dev/null 2>&1 || true
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is needed to build the Kubernetes control plane from the Go module proxy;" >&2
  echo "       install Go >= 1.24 (e.g. apt-get install golang-go) and run this again" >&2
  exit 1
fi
echo "etcd $(etcd --version | head -n1 | awk '{print $3}'), $(go version | awk '{print $3}')"
