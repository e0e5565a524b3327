#!/usr/bin/env bash
# The real serving engines the benchmark is tested against, each in its own virtualenv under
# .cache/engines (kept between runs; re-made when the pins change). torch from PyPI brings
# NVIDIA's CUDA libraries too (about 5 GB): they load lazily, and the tests run on the CPU.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
venv=.cache/engines/transformers-serve
stamp=$venv/.gpufleet-setup
want=$(cat requirements/engines.txt requirements/engines-constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "engines: creating $venv (transformers serve, torch; a few minutes)"
  rm -rf "$venv"
  python=$(command -v python3.11 || command -v python3)
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -c requirements/engines-constraints.txt -r requirements/engines.txt
  echo "$want" > "$stamp"
fi
echo "engines: ready ($venv)"
