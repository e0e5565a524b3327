#!/usr/bin/env bash
# Build the lab's Kubernetes tools from Go modules, at pinned versions, into
# .cache/k8s/<k8s version>/bin, a link to the user cache (kept between runs and clones: a second run does nothing).
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd  (k8s.io/kubernetes)
#   kubelet, kube-proxy (k8s.io/kubernetes), containerd, its runc shim and ctr (the lab's real nodes)
#   pause: the lab's pod sandbox process (scripts/lab-pause)
#   node_exporter at the versions the pinned kube-prometheus-stack charts deploy (their DaemonSet
#   tolerates every taint, so it runs on the lab's real nodes)
#   Prometheus, the Prometheus Operator and its config-reloader, at the versions kube-prometheus-stack
#   79.0.1 deploys
#   kwok (simulated nodes), helm, and KServe's InferenceService CRD.
#
# Two build streams run at once, Kubernetes and the rest: one go build alone leaves a core idle
# while it links or waits on the module proxy. Only the Go toolchain and the Go module proxy are
# used. Nothing is committed.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
KWOK_VERSION=v0.7.0
HELM_VERSION=v3.19.5
KSERVE_VERSION=v0.15.2
CONTAINERD_VERSION=v2.3.7
NODE_EXPORTER_VERSIONS="v1.9.1 v1.10.2"  # kube-prometheus-stack 77.14.0 and 79.0.1
# Prometheus at the version kube-prometheus-stack 79.0.1 deploys (v3.7.2 is its module's v0.307.2),
# with the Kubernetes service discovery only (file and HTTP are always in): the cloud providers'
# would triple the build, and the lab has no cloud. The web UI's assets need npm, which cannot be
# reached: the UI pages are missing, the HTTP API that everything here uses is whole.
PROMETHEUS_VERSION=v3.7.2
PROMETHEUS_MODULE_VERSION=v0.307.2
# The Prometheus Operator that kube-prometheus-stack 79.0.1 deploys. The checksum database does not
# list this version, so the go.sum hashes of its module and its two nested modules are pinned here.
OPERATOR_VERSION=v0.86.1
OPERATOR_MODULE_SUMS="
github.com/prometheus-operator/prometheus-operator h1:pHUuiRErcFb3nFDox7RxoxpEN0FyT24GtYOkr2GBu04=
github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring h1:j/GvU9UxlK5nuUKOWYOY0LRqcfHZl1ffTOa46+00Cys=
github.com/prometheus-operator/prometheus-operator/pkg/client h1:IqbpBVUahr2978vI6GkoCeaaugklgtq0M0FRJ5Ytdkk=
"

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${GPUFLEET_K8S_DIR:-$repo/.cache/k8s/$K8S_VERSION}
if [ -z "${GPUFLEET_K8S_DIR:-}" ]; then
  # The binaries live in the user's cache, per Kubernetes version, and .cache/k8s/<version> links to
  # them: a fresh clone (CI's) links instead of linking every binary again (about 2 minutes).
  store=${GPUFLEET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet}/k8s/$K8S_VERSION
  mkdir -p "$(dirname "$store")" "$(dirname "$out")"
  # A checkout that built before this moves its binaries there rather than building them again.
  if [ -d "$out" ] && [ ! -L "$out" ]; then
    if [ -e "$store" ]; then rm -rf "$out"; else mv "$out" "$store"; fi
  fi
  mkdir -p "$store"
  ln -sfn "$store" "$out"
fi
bin=$out/bin
mkdir -p "$bin" "$out/crds"
# The Prometheus Operator CRDs once generated here with controller-gen: the lab takes the pinned chart's.
rm -f "$out"/crds/monitoring.coreos.com_*.yaml "$bin/controller-gen"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
step() { echo "k8s tools: $* ($(date +%T))"; }

# KServe's InferenceService CRD, as KServe publishes it in its module (config/crd/full),
# so the lab API checks InferenceServices against the real schema. No controller runs.
kserve_crd=$out/crds/serving.kserve.io_inferenceservices.yaml
if [ ! -f "$kserve_crd" ]; then
  step "KServe $KSERVE_VERSION InferenceService CRD"
  kserve=$(go mod download -json "github.com/kserve/kserve@$KSERVE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  install -m 0644 "$kserve/config/crd/full/serving.kserve.io_inferenceservices.yaml" "$kserve_crd"
fi
# The pod sandbox's process (registry.k8s.io/pause cannot be pulled here): rebuilt when its source changes.
pause_src=$repo/scripts/lab-pause
if [ ! -x "$bin/pause" ] || [ "$pause_src/main.go" -nt "$bin/pause" ]; then
  (cd "$pause_src" && GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$bin/pause" .)
fi

build_tools() {  # everything but Kubernetes itself, each from its own module
  # helm, as its own Makefile builds it: the Kubernetes version `helm template` assumes without a
  # cluster is client-go's (1.20 otherwise, which charts' kubeVersion constraints refuse).
  local helm_stamp=$out/.built-helm-$HELM_VERSION
  if [ ! -f "$helm_stamp" ]; then
    step "building helm $HELM_VERSION"
    local client_go kv
    client_go=$(sed -n 's#^\s*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' \
      "$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')")
    kv="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$client_go"
    kv="$kv -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$client_go"
    GOBIN=$bin go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION $kv" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    touch "$helm_stamp"
  fi
  # The lab nodes' container runtime, as containerd's own release builds it (static, no cgo).
  local containerd_stamp=$out/.built-containerd-$CONTAINERD_VERSION
  if [ ! -f "$containerd_stamp" ]; then
    step "building containerd $CONTAINERD_VERSION"
    GOBIN=$bin go install -trimpath \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
    touch "$containerd_stamp"
  fi
  local v tmp
  for v in $NODE_EXPORTER_VERSIONS; do
    if [ ! -x "$bin/node_exporter-$v" ]; then
      step "building node_exporter $v"
      tmp=$(mktemp -d)
      GOBIN=$tmp go install -trimpath \
        -ldflags "-s -w -X github.com/prometheus/common/version.Version=${v#v}" "github.com/prometheus/node_exporter@$v"
      mv "$tmp/node_exporter" "$bin/node_exporter-$v" && rmdir "$tmp"
    fi
  done
  # The Prometheus Operator's module replaces two of its own packages with nested modules, which its
  # zip leaves out (so `go install` refuses it): built in a copy of its source with those two beside it.
  if [ ! -x "$bin/prometheus-operator-$OPERATOR_VERSION" ] || [ ! -x "$bin/prometheus-config-reloader-$OPERATOR_VERSION" ]; then
    step "building the Prometheus Operator $OPERATOR_VERSION"
    local module=github.com/prometheus-operator/prometheus-operator src part dir cmd
    src=$(mktemp -d)
    for part in "" /pkg/apis/monitoring /pkg/client; do
      dir=$(pinned_operator_source "$module$part")  # an assignment, so that a wrong hash stops the build
      mkdir -p "$src$part" && cp -r "$dir/." "$src$part"
    done
    chmod -R u+w "$src"
    for cmd in operator prometheus-config-reloader; do
      (cd "$src" && GONOSUMDB=$module go build -trimpath \
        -ldflags "-s -w -X github.com/prometheus/common/version.Version=${OPERATOR_VERSION#v}" \
        -o "$bin/${cmd/#operator/prometheus-operator}-$OPERATOR_VERSION" "./cmd/$cmd")
    done
    rm -rf "$src"
  fi
  # Its module has exclude directives (so `go install` refuses it): built in a copy of its source,
  # whose generated plugin list is cut to the Kubernetes discovery.
  if [ ! -x "$bin/prometheus-$PROMETHEUS_VERSION" ]; then
    step "building Prometheus $PROMETHEUS_VERSION"
    local src dir
    dir=$(go mod download -json "github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION" \
      | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
    src=$(mktemp -d)
    cp -r "$dir/." "$src" && chmod -R u+w "$src"
    printf 'package plugins\n\nimport _ "github.com/prometheus/prometheus/discovery/kubernetes"\n' > "$src/plugins/plugins.go"
    (cd "$src" && go build -trimpath \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}" \
      -o "$bin/prometheus-$PROMETHEUS_VERSION" ./cmd/prometheus)
    rm -rf "$src"
  fi
  local kwok_stamp=$out/.built-kwok-$KWOK_VERSION
  if [ ! -f "$kwok_stamp" ]; then
    step "building kwok $KWOK_VERSION"
    GOBIN=$bin go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    touch "$kwok_stamp"
  fi
}

pinned_operator_source() {  # the module's source directory, once its hash matches the pin
  local fetched sum
  fetched=$(GONOSUMDB=$1 go mod download -json "$1@$OPERATOR_VERSION")
  sum=$(echo "$fetched" | sed -n 's/.*"Sum": "\(.*\)",/\1/p')
  if ! echo "$OPERATOR_MODULE_SUMS" | grep -qxF "$1 $sum"; then
    echo "k8s tools: $1@$OPERATOR_VERSION has hash $sum, not the one pinned in $0" >&2
    return 1
  fi
  echo "$fetched" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'
}

KUBERNETES_BINARIES="kubelet kube-proxy kube-apiserver kube-controller-manager kube-scheduler kubectl"

build_kubernetes() {
  local cmd missing=()
  for cmd in $KUBERNETES_BINARIES etcd; do
    [ -x "$bin/$cmd" ] || missing+=("$cmd")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  local major=${K8S_VERSION%%.*} minor=${K8S_VERSION#*.}
  minor=${minor%%.*}
  # k8s.io/kubernetes is built as a dependency of a scratch module. Its own go.mod
  # points every k8s.io staging module at ./staging; here each one becomes the
  # published k8s.io/NAME v0.MINOR.PATCH instead.
  local work gomod staging_version=v0.${K8S_VERSION#*.}
  work=$(mktemp -d)
  cd "$work"
  go mod init gpufleet.invalid/labk8s >/dev/null 2>&1
  gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\t\1 => \1 '"$staging_version"'#p' "$gomod"
    echo ")"
  } >> go.mod
  # The version the binaries report (helm checks charts' kubeVersion against it).
  local pkg ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags="$ldflags -X $pkg.gitTreeState=clean"
  done
  step "resolving k8s.io/kubernetes v$K8S_VERSION modules"
  go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" >/dev/null 2>&1 || go mod tidy
  for cmd in "${missing[@]}"; do
    if [ "$cmd" = etcd ]; then
      step "building etcd (the version k8s.io/kubernetes $K8S_VERSION pins)"
      go get go.etcd.io/etcd/server/v3 >/dev/null 2>&1
      go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
    else
      step "building $cmd"
      go build -trimpath -ldflags "$ldflags" -o "$bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    fi
  done
  cd / && rm -rf "$work"
}

build_tools &
tools=$!
trap 'pkill -P "$tools" 2>/dev/null; kill "$tools" 2>/dev/null || true' EXIT  # a failed stream stops the other
build_kubernetes
wait "$tools"
trap - EXIT
step "ready: $(ls "$bin" | tr '\n' ' ')"
