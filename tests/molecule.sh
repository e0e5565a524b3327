#!/usr/bin/env bash
# Run every scenario of every role (or of the roles named as arguments) with the
# shared config in molecule/config.yml, on the lab base image.
#
# All of them: two workers side by side, each one scenario at a time. The cluster roles' scenarios
# (against the lab's API servers; they add and remove the GPU cluster's monitoring CRDs, so never
# two at once) all go to the first worker, which then takes host scenarios (each in its own
# containers) from the end of the list while the second takes them from the start; a scenario is
# claimed with an atomic mkdir. Each scenario's output goes to .cache/molecule/<role>-<scenario>.log;
# a failed one's end is printed. Named roles: one after the other, the output on the terminal.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export GPUFLEET_REPO=$repo
# The real charts, as released, beside the checkout (../shared/charts).
export GPUFLEET_CHARTS_DIR=${GPUFLEET_CHARTS_DIR:-$(cd "$repo/.." && pwd)/shared/charts}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/.lab/containers.conf}
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
logs=$repo/.cache/molecule
mkdir -p "$logs"
# The key molecule/config.yml's ssh connection into the containers uses (molecule/shared/container-sshd).
[ -f "$logs/ssh/id_ed25519" ] || { mkdir -p -m 0700 "$logs/ssh" && ssh-keygen -q -t ed25519 -N '' -C gpufleet-molecule -f "$logs/ssh/id_ed25519"; }

role_dir() {  # role: the product's (roles/) or the lab's (lab/roles/)
  if [ -d "$repo/roles/$1" ]; then echo "$repo/roles/$1"; else echo "$repo/lab/roles/$1"; fi
}

scenario() {  # role/scenario [log]
  local role=${1%%/*} name=${1##*/} started=$SECONDS
  echo "=== molecule: $role ($name)"
  # To its log file when given (not `> /dev/stdout`: when stdout is a file, that truncates it).
  if (cd "$(role_dir "$role")" || exit 1
      [ -z "${2:-}" ] || exec > "$2" 2>&1
      molecule -c "$repo/molecule/config.yml" test -s "$name"); then
    echo "=== molecule: $role ($name) passed in $((SECONDS - started)) s"
  else
    echo "=== molecule: $role ($name) FAILED after $((SECONDS - started)) s"
    [ -z "${2:-}" ] || { echo "--- the end of $2:"; tail -n 80 "$2"; }
    return 1
  fi
}

worker() {  # role/scenario...: runs those not claimed yet, stops at its first failure
  local entry
  for entry in "$@"; do
    mkdir "$logs/claims/${entry/\//-}" 2>/dev/null || continue
    scenario "$entry" "$logs/${entry/\//-}.log" || return 1
  done
}

cluster=() hosts=()
roles=("$@")
[ ${#roles[@]} -gt 0 ] || for dir in "$repo"/roles/*/molecule "$repo"/lab/roles/*/molecule; do
  roles+=("$(basename "$(dirname "$dir")")")
done
for role in "${roles[@]}"; do
  for file in "$(role_dir "$role")"/molecule/*/molecule.yml; do
    entry=$role/$(basename "$(dirname "$file")")
    if grep -q "managed: false" "$file"; then cluster+=("$entry"); else hosts+=("$entry"); fi
  done
done

if [ $# -gt 0 ]; then
  for entry in "${cluster[@]}" "${hosts[@]}"; do scenario "$entry"; done
  exit 0
fi
rm -rf "$logs/claims" && mkdir -p "$logs/claims"
reversed=()
for ((i = ${#hosts[@]} - 1; i >= 0; i--)); do reversed+=("${hosts[i]}"); done
worker "${cluster[@]}" "${reversed[@]}" & first=$!
worker "${hosts[@]}" & second=$!
failed=0
wait $first || failed=1
wait $second || failed=1
[ $failed -eq 0 ] || { echo "molecule: a scenario failed (see above)"; exit 1; }
echo "molecule: $(( ${#cluster[@]} + ${#hosts[@]} )) scenario(s) passed"
