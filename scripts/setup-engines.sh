#!/usr/bin/env bash
# The real serving engines the benchmark is tested against, each in its own virtualenv. torch from
# PyPI brings NVIDIA's CUDA libraries too (about 5 GB): they load lazily, and the tests run on the CPU.
#
# The virtualenv lives in the user's cache, named by the hash of its pins, and .cache/engines/ in the
# checkout links to it: a fresh clone (CI's) reuses it instead of spending minutes and 5.6 GB on the
# same packages again; changed pins make a new one.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
want=$(cat requirements/engines.txt requirements/engines-constraints.txt | sha256sum | cut -c1-16)
store=${GPUFLEET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet}/engines
venv=$store/transformers-serve-$want
stamp=$venv/.gpufleet-setup
if [ ! -f "$stamp" ]; then
  echo "engines: creating $venv (transformers serve, torch; a few minutes)"
  rm -rf "$venv"
  mkdir -p "$store"
  python=$(command -v python3.11 || command -v python3)
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -c requirements/engines-constraints.txt -r requirements/engines.txt
  echo "$want" > "$stamp"
fi
mkdir -p .cache/engines
# A virtualenv made here by an older version of this script is a folder, not a link.
[ -L .cache/engines/transformers-serve ] || rm -rf .cache/engines/transformers-serve
ln -sfn "$venv" .cache/engines/transformers-serve
echo "engines: ready (.cache/engines/transformers-serve -> $venv)"
