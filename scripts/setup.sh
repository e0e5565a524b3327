#!/usr/bin/env bash
# Install everything gpufleet needs on a fresh Debian 12 machine (root), then a
# project virtualenv with pinned Python packages. Safe to re-run: it skips what is done.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# The packages, and the programs the lab and tests run from each: requirements/debian.txt.
mapfile -t debian_packages < <(sed -e 's/#.*//' -e '/^\s*$/d' requirements/debian.txt | awk '{print $1}')
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

# Go builds the lab's Kubernetes, containerd-side and FIXTURE tools from Go modules. Debian 12's
# golang-go (1.19) is too old for them, but can fetch a current toolchain, which the Go project
# publishes as the module golang.org/toolchain; it is linked into .venv/bin, which make puts on PATH.
GO_MIN=1.25 GO_TOOLCHAIN=go1.26.8
go_ok() { command -v go >/dev/null && printf '%s\n%s\n' "go$GO_MIN" "$(go env GOVERSION)" | sort -VC; }
if ! go_ok && ! PATH=$repo/.venv/bin:$PATH go_ok; then
  echo "setup: fetching the Go toolchain $GO_TOOLCHAIN as a Go module"
  command -v go >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null
  dir=$(GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-amd64" \
    | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  # A module zip keeps no executable bits; go's own toolchain switch restores them the same way.
  chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/*
  mkdir -p .venv/bin
  ln -sf "$dir/bin/go" "$dir/bin/gofmt" .venv/bin/
fi

python=$(command -v python3.11 || command -v python3)
stamp=.venv/.gpufleet-setup
want=$(cat requirements/constraints.txt requirements/dev.txt pyproject.toml lab/pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: creating .venv with pinned packages"
  "$python" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c requirements/constraints.txt -r requirements/dev.txt
  # The product, and the built-in lab beside it (its own package: lab/pyproject.toml).
  .venv/bin/pip install -q --no-deps -e . -e lab
  echo "$want" > "$stamp"
fi
echo "setup: ready (activate with: source .venv/bin/activate)"
