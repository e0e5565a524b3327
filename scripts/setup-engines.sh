#!/usr/bin/env bash
# The real serving engines the benchmark is tested against, and AIPerf (the benchmark its figures are
# reconciled with), each in its own virtualenv. torch from PyPI brings NVIDIA's CUDA libraries too (about
# 5 GB): they load lazily, and the tests run on the CPU. AIPerf is about 1.2 GB, no torch.
#
# Each virtualenv lives in the user's cache, named by the hash of its pins, and .cache/engines/ in the
# checkout links to it: a fresh clone (CI's) reuses it instead of spending minutes and gigabytes on the
# same packages again; changed pins make a new one.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
store=${GPUFLEET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet}/engines
mkdir -p "$store" .cache/engines

# venv NAME REQUIREMENTS CONSTRAINTS WHAT: the virtualenv NAME from its pins, linked as .cache/engines/NAME.
venv() {
  local name=$1 requirements=$2 constraints=$3 what=$4 want dir
  want=$(cat "$requirements" "$constraints" | sha256sum | cut -c1-16)
  dir=$store/$name-$want
  if [ ! -f "$dir/.gpufleet-setup" ]; then
    echo "engines: creating $dir ($what; a few minutes)"
    rm -rf "$dir"
    "$(command -v python3.11 || command -v python3)" -m venv "$dir"
    "$dir/bin/pip" install -q --upgrade pip
    "$dir/bin/pip" install -q -c "$constraints" -r "$requirements"
    echo "$want" > "$dir/.gpufleet-setup"
  fi
  # A virtualenv made here by an older version of this script is a folder, not a link.
  [ -L ".cache/engines/$name" ] || rm -rf ".cache/engines/$name"
  ln -sfn "$dir" ".cache/engines/$name"
  echo "engines: ready (.cache/engines/$name -> $dir)"
}

venv transformers-serve requirements/engines.txt requirements/engines-constraints.txt "transformers serve, torch"
venv aiperf requirements/aiperf.txt requirements/aiperf-constraints.txt "AIPerf"
