#!/usr/bin/env bash
# Install everything gpufleet needs on a fresh Debian 12 machine (root), then a
# project virtualenv with pinned Python packages. Safe to re-run: it skips what is done.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

debian_packages=(podman runc conmon netavark aardvark-dns uidmap debootstrap openssh-client prometheus)
missing=()
for pkg in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The Debian prometheus package starts a server on install; the controller only needs promtool.
  systemctl disable --now prometheus >/dev/null 2>&1 || pkill -x prometheus || true
fi

python=$(command -v python3.11 || command -v python3)
stamp=.venv/.gpufleet-setup
want=$(cat requirements/constraints.txt requirements/dev.txt pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: creating .venv with pinned packages"
  "$python" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c requirements/constraints.txt -r requirements/dev.txt
  .venv/bin/pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
echo "setup: ready (activate with: source .venv/bin/activate)"
