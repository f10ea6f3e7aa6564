#!/usr/bin/env bash
# The container image's install step without a container builder, as the Dockerfile's build stage does it:
# draq's wheel and its dependencies as binary wheels only (as root, like the build stage; pip's cache makes
# later runs fast), then, as an unprivileged user, a fresh virtualenv installed offline from those wheels
# and `draq run --help` from it. The installed draq must not contain the local-cluster kit
# (admission.localcluster: source checkouts only), and `draq demo` must say so instead of failing.
set -euo pipefail
cd "$(dirname "$0")/.."
user=${DRAQ_IMAGE_CHECK_USER:-nobody}
python=${PYTHON:-python3}
as_user() { runuser -u "$user" -- env HOME="$work/home" PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"; }

if [ "$(id -u)" != 0 ]; then
  echo "check-image-install: run as root (it switches to the user '$user' with runuser)" >&2
  exit 1
fi
work=$(mktemp -d /tmp/draq-image-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/home" "$work/wheels"
cp -r pyproject.toml README.md admission "$work/"
find "$work/admission" -name __pycache__ -prune -exec rm -rf {} +
started=$(date +%s)
cd "$work"
chown -R "$user" "$work"
# An interpreter the user can run (a pyenv Python under /root is not readable by others). The wheels are
# built by a virtualenv of the same interpreter, so their tags match it.
runtime=$python
if ! as_user "$runtime" -c 'import venv' 2>/dev/null; then runtime=/usr/bin/python3; fi
echo "check-image-install: wheels and virtualenv with $(as_user "$runtime" --version), installed as $user"
"$runtime" -m venv "$work/build"
if ! "$work/build/bin/pip" wheel -q --only-binary=:all: --no-binary=draq --wheel-dir "$work/wheels" . \
    >"$work/wheel.log" 2>&1; then
  cat "$work/wheel.log" >&2
  exit 1
fi
chown -R "$user" "$work/wheels"
as_user "$runtime" -m venv "$work/draq"
as_user "$work/draq/bin/pip" install -q --no-index --find-links "$work/wheels" draq
as_user "$work/draq/bin/pip" uninstall -q --yes pip
as_user "$work/draq/bin/draq" run --help >"$work/help.txt"
grep -q -- "--webhook-port" "$work/help.txt"
grep -q -- "--metrics-port" "$work/help.txt"
# -I: the working directory (the copied sources) is not on the path, only what was installed.
if ! as_user "$work/draq/bin/python" -I -c 'import importlib.util as u, sys; import admission.cli.run
sys.exit(u.find_spec("admission.localcluster") is not None)'; then
  echo "check-image-install: the installed draq contains the local-cluster kit (admission.localcluster)" >&2
  exit 1
fi
if [ -n "$(find "$work/draq" -path '*/admission/localcluster*' -print -quit)" ]; then
  echo "check-image-install: files of admission/localcluster were installed" >&2
  exit 1
fi
status=0
as_user "$work/draq/bin/draq" demo --once >"$work/demo.txt" 2>&1 || status=$?
if [ "$status" != 2 ] || ! grep -q "source checkout" "$work/demo.txt" || grep -q Traceback "$work/demo.txt"; then
  echo "check-image-install: 'draq demo' without the kit did not end with its message (status $status):" >&2
  cat "$work/demo.txt" >&2
  exit 1
fi
if as_user "$work/draq/bin/python" -c 'import pytest' 2>/dev/null; then
  echo "check-image-install: a development dependency (pytest) was installed" >&2
  exit 1
fi
echo "check-image-install: draq $(as_user "$work/draq/bin/python" -c 'import importlib.metadata as m; print(m.version("draq"))') installed from $(ls "$work/wheels" | wc -l) wheels as $user, without the local-cluster kit; 'draq run --help' works, 'draq demo' says where the kit is ($(( $(date +%s) - started ))s)"
