#!/usr/bin/env bash
# System packages the local control plane needs: etcd (Debian's etcd-server) and a Go toolchain; and
# Debian's prometheus (prometheus and promtool) for the dashboard and metrics tests.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v etcd >/dev/null 2>&1; then
  echo "installing etcd (Debian package etcd-server) ..."
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
  # The package starts a system etcd on 2379 where an init system runs; the control plane uses its own.
  as_root systemctl disable --now etcd >/dev/null 2>&1 || true
fi
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  # promtool checks the dashboards' queries; the metrics e2e test runs its own prometheus on 127.0.0.1.
  echo "installing prometheus and promtool (Debian package prometheus) ..."
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package starts a system prometheus where an init system runs; draq's tests start their own.
  as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is needed to build the Kubernetes control plane from the Go module proxy;" >&2
  echo "       install Go >= 1.24 (e.g. apt-get install golang-go) and run this again" >&2
  exit 1
fi
echo "etcd $(etcd --version | head -n1 | awk '{print $3}'), $(go version | awk '{print $3}'), promtool $(promtool --version 2>&1 | head -n1 | awk '{print $3}')"
