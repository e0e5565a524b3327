#!/usr/bin/env bash
# Run every scenario of every role (or of the roles named as arguments) with the
# shared config in molecule/config.yml, on the lab base image; a cluster scenario (its molecule.yml
# holds the line `# gpufleet: cluster scenario`) with molecule/cluster.yml's settings over it.
#
#   tests/molecule.sh            all of them, in two workers side by side
#   tests/molecule.sh --apart    those that use nothing of the running lab, in one worker
#   tests/molecule.sh --lab      those that use the lab's clusters, in two workers
#   tests/molecule.sh ROLE...    the roles' scenarios one after the other, the output on the terminal
#
# A scenario uses the lab when it runs against the lab's API servers (a cluster scenario) or names a
# lab kubeconfig (`.lab/`); the others run only in containers of their own. `make test` runs the
# --apart ones beside the lab's test suites, which leave a core idle much of the time, and the rest
# after them. The cluster scenarios that add and remove CRDs other scenarios read never run two at
# once: those of the GPU cluster's monitoring (their prepare imports
# molecule/shared/gpu_cluster_monitoring_crds.yml), and KEDA's and Argo Rollouts' (their molecule.yml
# holds `# gpufleet: adds and removes CRDs`; the vllm and triton roles read which of them the cluster
# knows, and a CRD gone between that read and the next task failed a check run). In two workers
# they all go to the first, the other cluster scenarios (each in namespaces of its own) to the
# second, and then the first takes host scenarios from the end of the list while the second takes
# them from the start; a scenario is claimed with an atomic mkdir. Each scenario's output goes to .cache/molecule/<role>-<scenario>.log;
# a failed one's end is printed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export GPUFLEET_REPO=$repo
# The real charts, as released, that travel with the checkout (lab/charts).
export GPUFLEET_CHARTS_DIR=${GPUFLEET_CHARTS_DIR:-$repo/lab/charts}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/.lab/containers.conf}
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
logs=$repo/.cache/molecule
mkdir -p "$logs"
# The key molecule/config.yml's ssh connection into the containers uses (molecule/shared/container-sshd).
[ -f "$logs/ssh/id_ed25519" ] || { mkdir -p -m 0700 "$logs/ssh" && ssh-keygen -q -t ed25519 -N '' -C gpufleet-molecule -f "$logs/ssh/id_ed25519"; }

role_dir() {  # role: the product's (roles/) or the lab's (lab/roles/)
  if [ -d "$repo/roles/$1" ]; then echo "$repo/roles/$1"; else echo "$repo/lab/roles/$1"; fi
}

is_cluster() {  # molecule.yml
  grep -qxF "# gpufleet: cluster scenario" "$1"
}

shares_crds() {  # molecule.yml: its scenario adds and removes CRDs that other scenarios read
  grep -qxF "# gpufleet: adds and removes CRDs" "$1" ||
    grep -qs "gpu_cluster_monitoring_crds.yml" "$(dirname "$1")/prepare.yml"
}

scenario() {  # role/scenario [log]
  local role=${1%%/*} name=${1##*/} started=$SECONDS
  echo "=== molecule: $role ($name)"
  # To its log file when given (not `> /dev/stdout`: when stdout is a file, that truncates it).
  if (cd "$(role_dir "$role")" || exit 1
      [ -z "${2:-}" ] || exec > "$2" 2>&1
      bases=(-c "$repo/molecule/config.yml")
      ! is_cluster molecule/"$name"/molecule.yml || bases+=(-c "$repo/molecule/cluster.yml")
      molecule "${bases[@]}" test -s "$name"); then
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
    mkdir "$claims/${entry/\//-}" 2>/dev/null || continue
    scenario "$entry" "$logs/${entry/\//-}.log" || return 1
  done
}

part=all
case ${1:-} in --apart | --lab) part=${1#--} && shift ;; esac
cluster=() apart_cluster=() hosts=()
roles=("$@")
[ ${#roles[@]} -gt 0 ] || for dir in "$repo"/roles/*/molecule "$repo"/lab/roles/*/molecule; do
  roles+=("$(basename "$(dirname "$dir")")")
done
for role in "${roles[@]}"; do
  for file in "$(role_dir "$role")"/molecule/*/molecule.yml; do
    entry=$role/$(basename "$(dirname "$file")")
    if is_cluster "$file"; then uses_lab=cluster; elif grep -q '/\.lab/' "$file"; then uses_lab=host; else uses_lab=no; fi
    case $part/$uses_lab in
      all/cluster | lab/cluster) if shares_crds "$file"; then cluster+=("$entry"); else apart_cluster+=("$entry"); fi ;;
      all/* | lab/host | apart/no) hosts+=("$entry") ;;
    esac
  done
done

if [ $# -gt 0 ]; then
  for entry in "${cluster[@]}" "${apart_cluster[@]}" "${hosts[@]}"; do scenario "$entry"; done
  exit 0
fi
if [ "$part" = apart ]; then  # one worker: the lab's suites run beside it
  claims=$logs/claims-apart && rm -rf "$claims" && mkdir -p "$claims"
  worker "${hosts[@]}" || { echo "molecule: a scenario failed (see above)"; exit 1; }
  echo "molecule: ${#hosts[@]} scenario(s) that use nothing of the lab passed"
  exit 0
fi
claims=$logs/claims && rm -rf "$claims" && mkdir -p "$claims"
reversed=()
for ((i = ${#hosts[@]} - 1; i >= 0; i--)); do reversed+=("${hosts[i]}"); done
worker "${cluster[@]}" "${reversed[@]}" & first=$!
worker "${apart_cluster[@]}" "${hosts[@]}" & second=$!
failed=0
wait $first || failed=1
wait $second || failed=1
[ $failed -eq 0 ] || { echo "molecule: a scenario failed (see above)"; exit 1; }
echo "molecule: $(( ${#cluster[@]} + ${#apart_cluster[@]} + ${#hosts[@]} )) scenario(s)$([ "$part" = lab ] && echo " that use the lab") passed"
