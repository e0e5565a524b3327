#!/usr/bin/env bash
# Run every scenario of every role (or of the roles named as arguments) with the
# shared config in molecule/config.yml, on the lab base image.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export GPUFLEET_REPO=$repo
# The real charts, as released, beside the checkout (../shared/charts).
export GPUFLEET_CHARTS_DIR=${GPUFLEET_CHARTS_DIR:-$(cd "$repo/.." && pwd)/shared/charts}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/.lab/containers.conf}
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
roles=("$@")
if [ ${#roles[@]} -eq 0 ]; then
  for role in "$repo"/roles/*/molecule; do
    roles+=("$(basename "$(dirname "$role")")")
  done
fi
count=0
for role in "${roles[@]}"; do
  for scenario in "$repo/roles/$role"/molecule/*/molecule.yml; do
    name=$(basename "$(dirname "$scenario")")
    echo "=== molecule: $role ($name)"
    started=$SECONDS
    (cd "$repo/roles/$role" && molecule -c "$repo/molecule/config.yml" test -s "$name")
    echo "=== molecule: $role ($name) passed in $((SECONDS - started)) s"
    count=$((count + 1))
  done
done
echo "molecule: $count scenario(s) passed"
