#!/usr/bin/env bash
# Run every role's molecule scenario (or the roles named as arguments) with the
# shared config in molecule/config.yml, on the lab base image.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export GPUFLEET_REPO=$repo
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/.lab/containers.conf}
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
roles=("$@")
if [ ${#roles[@]} -eq 0 ]; then
  for scenario in "$repo"/roles/*/molecule/default/molecule.yml; do
    roles+=("$(basename "$(dirname "$(dirname "$(dirname "$scenario")")")")")
  done
fi
for role in "${roles[@]}"; do
  echo "=== molecule: $role"
  (cd "$repo/roles/$role" && molecule -c "$repo/molecule/config.yml" test)
done
echo "molecule: ${#roles[@]} scenario(s) passed"
