#!/usr/bin/env bash
# Build the lab's Kubernetes tools from Go modules, at pinned versions, into
# .cache/k8s/<k8s version>/bin, a link to the user cache (kept between runs and clones: a second run does nothing).
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd  (k8s.io/kubernetes)
#   kubelet, kube-proxy (k8s.io/kubernetes), containerd, its runc shim and ctr (the lab's real nodes)
#   pause: the lab's pod sandbox process (lab/scripts/lab-pause)
#   node_exporter at the versions the pinned kube-prometheus-stack charts deploy (their DaemonSet
#   tolerates every taint, so it runs on the lab's real nodes)
#   Prometheus, the Prometheus Operator and its config-reloader, at the versions kube-prometheus-stack
#   79.0.1 deploys
#   kwok (simulated nodes) and its stages, helm, and KServe's InferenceService CRD.
#   gpufleet-lab-dra-driver: the lab's DRA kubelet plugin (lab/dra-driver, a FIXTURE stand-in for NVIDIA's).
#   The route CRDs of Istio, the Gateway API and Argo Rollouts, for the canary routes' checks.
#   CoreDNS, the clusters' DNS (KEDA's metrics server finds its operator by its Service's name).
#
#   build-lab-k8s.sh controllers: the controllers the serving roles drive, each at the version of its
#   pinned chart, in its own module graph: KEDA's operator, metrics API server and admission webhooks,
#   Argo Rollouts' controller (only their suites and scenarios need them), and Alertmanager (the GPU
#   remediation's drill).
#
# All of them but KEDA and one node_exporter are built in one module graph, Kubernetes' own: each package is compiled once,
# where building each tool from its own module compiled k8s.io/api, client-go, gRPC and
# OpenTelemetry four or five times over, at as many versions (about a third of a cold build).
# So each tool is its release's source built against the newest version of a shared dependency that
# any of them asks for (Go's minimal version selection), not against its own go.mod's: the lab's
# tests run them for real. Only the Go toolchain and the Go module proxy are used. Nothing is committed.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
# The first kwok release on Kubernetes 1.36's modules (v0.7.0 imports a kubelet package 1.35 moved).
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.19.5
KSERVE_VERSION=v0.15.2
# The meshes' route CRDs the vllm role's canary renders for (checked against, never run: no mesh here):
# Istio's API and the Gateway API (its standard channel; v1.7 needs a newer Go than this machine's).
ISTIO_API_VERSION=v1.32.0
GATEWAY_API_VERSION=v1.6.3
CONTAINERD_VERSION=v2.3.7
NODE_EXPORTER_VERSION=v1.10.2           # kube-prometheus-stack 79.0.1
NODE_EXPORTER_PREVIOUS_VERSION=v1.9.1   # 77.14.0, for the chart upgrade test: its own module graph
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
# The operator's admission webhook uses controller-runtime v0.22's API, which v0.23 changed; kwok's
# module asks for v0.24 without importing it in the kwok binary. So the graph keeps the operator's.
CONTROLLER_RUNTIME_VERSION=v0.22.2
# Old gRPC releases deep in the graph ask for cloud.google.com/go v0.26.0, which still held the
# compute/metadata package that is its own module now: Prometheus' build finds it twice. A version
# without it (the one the operator's Thanos module asks for) settles that.
CLOUD_GO_VERSION=v0.118.0
# KEDA at the version the pinned chart (lab/charts/keda-2.20.2.tgz) deploys. Its own module graph: its
# go.mod pins k8s.io/* v0.35 and controller-runtime v0.23 with replace directives, and on Kubernetes
# 1.36's modules controller-runtime does not compile (../shared/LAB-NOTES.md). Built as upstream does,
# in its module (the module cache's copy), the three commands in one `go build`.
KEDA_VERSION=v2.20.2
# Argo Rollouts' controller at the version the pinned chart (lab/charts/argo-rollouts-2.41.0.tgz) deploys:
# its own module graph too (k8s.io/* v0.34 by replace directives), built as upstream's Makefile does.
ARGO_ROLLOUTS_VERSION=v1.9.0
# Alertmanager at the version kube-prometheus-stack 79.0.1 deploys, in its own module graph as upstream
# builds it: the GPU remediation's drill (lab/tests/k8s/test_gpu_remediation.py) runs it on the lab
# machine, routing the GPU rules' alerts to the collection's rulebook.
ALERTMANAGER_VERSION=v0.28.1
# CoreDNS as kubeadm deploys it, with the plugins a cluster's DNS uses (its own module graph; the
# generated plugin list is cut to them, as CoreDNS's plugin.cfg is for a custom build).
# `metrics` is the Corefile's `prometheus` (forward and cache import it too).
COREDNS_VERSION=v1.14.7
COREDNS_PLUGINS="errors health ready metrics kubernetes forward cache loop reload loadbalance log"

# Each tool's binary, the package it is built from and its version, one per line: the build runs
# when this list changes or a binary is missing.
KUBERNETES_BINARIES="kubelet kube-proxy kube-apiserver kube-controller-manager kube-scheduler kubectl"
TOOLS="$(for cmd in $KUBERNETES_BINARIES; do echo "$cmd k8s.io/kubernetes/cmd/$cmd v$K8S_VERSION"; done)
etcd go.etcd.io/etcd/server/v3 as-kubernetes-v$K8S_VERSION-requires
containerd github.com/containerd/containerd/v2/cmd/containerd $CONTAINERD_VERSION
containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 $CONTAINERD_VERSION
ctr github.com/containerd/containerd/v2/cmd/ctr $CONTAINERD_VERSION
helm helm.sh/helm/v3/cmd/helm $HELM_VERSION
kwok sigs.k8s.io/kwok/cmd/kwok $KWOK_VERSION
prometheus-$PROMETHEUS_VERSION github.com/prometheus/prometheus/cmd/prometheus $PROMETHEUS_VERSION
prometheus-operator-$OPERATOR_VERSION github.com/prometheus-operator/prometheus-operator/cmd/operator $OPERATOR_VERSION
prometheus-config-reloader-$OPERATOR_VERSION github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader $OPERATOR_VERSION
node_exporter-$NODE_EXPORTER_VERSION github.com/prometheus/node_exporter $NODE_EXPORTER_VERSION"

repo=$(cd "$(dirname "$0")/../.." && pwd)
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
# What earlier versions of this script left: the operator CRDs it once generated (the lab takes the
# pinned chart's) and the per-tool stamps of the builds from each tool's own module.
rm -f "$out"/crds/monitoring.coreos.com_*.yaml "$bin/controller-gen" "$out"/.built-*
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
step() { echo "k8s tools: $* ($(date +%T))"; }
module_dir() {  # module@version: its source directory in the module cache
  go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'
}

if [ "${1:-}" = controllers ]; then
  # Named <command>-<version> as the other upstream images' binaries (nodes.py makes the images).
  if [ ! -x "$bin/keda-$KEDA_VERSION" ] || [ ! -x "$bin/keda-adapter-$KEDA_VERSION" ] \
    || [ ! -x "$bin/keda-admission-webhooks-$KEDA_VERSION" ]; then
    step "building KEDA $KEDA_VERSION (its own module graph)"
    tmp=$(mktemp -d)
    cp -r "$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")" "$tmp/keda" && chmod -R u+w "$tmp/keda"
    (cd "$tmp/keda" && go build -trimpath -ldflags "-s -w -X github.com/kedacore/keda/v2/version.Version=${KEDA_VERSION#v}" \
      -o "$tmp/bin/" ./cmd/operator ./cmd/adapter ./cmd/webhooks)
    mv "$tmp/bin/operator" "$bin/keda-$KEDA_VERSION"
    mv "$tmp/bin/adapter" "$bin/keda-adapter-$KEDA_VERSION"
    mv "$tmp/bin/webhooks" "$bin/keda-admission-webhooks-$KEDA_VERSION"
    rm -rf "$tmp"
  fi
  if [ ! -x "$bin/argo-rollouts-$ARGO_ROLLOUTS_VERSION" ]; then
    step "building Argo Rollouts $ARGO_ROLLOUTS_VERSION (its own module graph)"
    tmp=$(mktemp -d)
    cp -r "$(module_dir "github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION")" "$tmp/argo-rollouts"
    chmod -R u+w "$tmp/argo-rollouts"
    (cd "$tmp/argo-rollouts" && go build -trimpath \
      -ldflags "-s -w -X github.com/argoproj/argo-rollouts/utils/version.version=${ARGO_ROLLOUTS_VERSION#v}" \
      -o "$tmp/argo-rollouts-$ARGO_ROLLOUTS_VERSION" ./cmd/rollouts-controller)
    mv "$tmp/argo-rollouts-$ARGO_ROLLOUTS_VERSION" "$bin/"
    rm -rf "$tmp"
  fi
  if [ ! -x "$bin/alertmanager-$ALERTMANAGER_VERSION" ]; then
    step "building Alertmanager $ALERTMANAGER_VERSION (its own module graph)"
    tmp=$(mktemp -d)
    cp -r "$(module_dir "github.com/prometheus/alertmanager@$ALERTMANAGER_VERSION")" "$tmp/alertmanager"
    chmod -R u+w "$tmp/alertmanager"
    (cd "$tmp/alertmanager" && go build -trimpath \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${ALERTMANAGER_VERSION#v}" \
      -o "$tmp/alertmanager-$ALERTMANAGER_VERSION" ./cmd/alertmanager)
    mv "$tmp/alertmanager-$ALERTMANAGER_VERSION" "$bin/"
    rm -rf "$tmp"
  fi
  step "ready: $(cd "$bin" && echo keda* argo-rollouts* alertmanager*)"
  exit 0
fi

# KServe's InferenceService CRD, as KServe publishes it in its module (config/crd/full),
# so the lab API checks InferenceServices against the real schema. No controller runs.
kserve_crd=$out/crds/serving.kserve.io_inferenceservices.yaml
if [ ! -f "$kserve_crd" ]; then
  step "KServe $KSERVE_VERSION InferenceService CRD"
  kserve=$(module_dir "github.com/kserve/kserve@$KSERVE_VERSION")
  install -m 0644 "$kserve/config/crd/full/serving.kserve.io_inferenceservices.yaml" "$kserve_crd"
fi
# The CRDs a canary through a mesh is checked against (lab/tests/k8s/test_canary_routes.py installs
# them for its tests): Istio's VirtualService, the Gateway API's HTTPRoute, Argo Rollouts' own.
routes=$out/crds/routes
if [ ! -f "$routes/.complete-$ISTIO_API_VERSION-$GATEWAY_API_VERSION-$ARGO_ROLLOUTS_VERSION" ]; then
  step "the canary routes' CRDs: Istio $ISTIO_API_VERSION, Gateway API $GATEWAY_API_VERSION, Argo Rollouts $ARGO_ROLLOUTS_VERSION"
  rm -rf "$routes" && mkdir -p "$routes"
  install -m 0644 "$(module_dir "istio.io/api@$ISTIO_API_VERSION")/kubernetes/customresourcedefinitions.gen.yaml" \
    "$routes/istio.yaml"
  install -m 0644 \
    "$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" \
    "$routes/gateway-api-httproutes.yaml"
  argo=$(module_dir "github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION")
  install -m 0644 "$argo/manifests/crds/rollout-crd.yaml" "$routes/argo-rollouts-rollouts.yaml"
  install -m 0644 "$argo/manifests/crds/analysis-template-crd.yaml" "$routes/argo-rollouts-analysistemplates.yaml"
  touch "$routes/.complete-$ISTIO_API_VERSION-$GATEWAY_API_VERSION-$ARGO_ROLLOUTS_VERSION"
fi
# kwok's stages: since v0.8 kwok has none built in, so the lab gives it those v0.7 used by default,
# from its module: nodes become Ready and send status heartbeats (kwok keeps their leases), pods
# become Ready, complete and go when deleted.
kwok_stages=$out/kwok-stages.yaml
if [ ! -f "$kwok_stages" ] || ! grep -q "^# kwok $KWOK_VERSION\$" "$kwok_stages"; then
  step "kwok $KWOK_VERSION stages"
  kwok_module=$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")
  {
    echo "# kwok $KWOK_VERSION"
    for stage in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-complete \
      pod/fast/pod-delete; do
      echo "---" && cat "$kwok_module/kustomize/stage/$stage.yaml"
    done
  } > "$kwok_stages.tmp"
  mv "$kwok_stages.tmp" "$kwok_stages"
fi
# The pod sandbox's process (registry.k8s.io/pause cannot be pulled here): rebuilt when its source changes.
pause_src=$repo/lab/scripts/lab-pause
if [ ! -x "$bin/pause" ] || [ "$pause_src/main.go" -nt "$bin/pause" ]; then
  (cd "$pause_src" && GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$bin/pause" .)
fi

# The lab's DRA driver (lab/dra-driver, a FIXTURE stand-in for NVIDIA's DRA driver for GPUs), its own small
# module graph on Kubernetes' published v0.36 libraries: rebuilt when its source changes (a stamp of its
# files' hashes, since a fresh clone's files are all newer than the cached binary).
dra_src=$repo/lab/dra-driver
dra_stamp=$(cd "$dra_src" && sha256sum main.go go.mod go.sum | sha256sum | cut -c1-16)
if [ ! -x "$bin/gpufleet-lab-dra-driver" ] || [ "$(cat "$out/.dra-driver" 2>/dev/null)" != "$dra_stamp" ]; then
  step "building the lab's DRA driver (FIXTURE)"
  (cd "$dra_src" && go build -trimpath -ldflags "-s -w" -o "$bin/gpufleet-lab-dra-driver" .)
  echo "$dra_stamp" > "$out/.dra-driver"
fi

BUILT="$TOOLS
(controller-runtime $CONTROLLER_RUNTIME_VERSION, cloud.google.com/go $CLOUD_GO_VERSION)"
tools_built() {  # the list above was built, and every binary in it is there
  [ "$(cat "$out/.tools" 2>/dev/null)" = "$BUILT" ] || return 1
  local name rest
  while read -r name rest; do [ -x "$bin/$name" ] || return 1; done <<< "$TOOLS"
}

build_tools() {  # in a scratch module in $work
  cd "$work"
  go mod init gpufleet.invalid/labtools >/dev/null 2>&1
  # k8s.io/kubernetes is a dependency here. Its own go.mod points every k8s.io staging module at
  # ./staging; here each one becomes the published k8s.io/NAME v0.MINOR.PATCH instead.
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  # Prometheus' module has exclude directives, which only a main module may have: its source is
  # copied beside this module, with the generated plugin list cut to the Kubernetes discovery.
  cp -r "$(module_dir "github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION")" prometheus
  chmod -R u+w prometheus
  printf 'package plugins\n\nimport _ "github.com/prometheus/prometheus/discovery/kubernetes"\n' > prometheus/plugins/plugins.go
  {
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\t\1 => \1 v0.'"${K8S_VERSION#*.}"'#p' "$gomod"
    echo "	github.com/prometheus/prometheus => ./prometheus"
    echo "	sigs.k8s.io/controller-runtime => sigs.k8s.io/controller-runtime $CONTROLLER_RUNTIME_VERSION"
    echo ")"
  } >> go.mod
  # The operator's modules are not in the checksum database: go.sum holds the pinned hashes, and go
  # refuses a download that does not match them.
  local module sum
  while read -r module sum; do
    [ -n "$module" ] && echo "$module $OPERATOR_VERSION $sum"
  done <<< "$OPERATOR_MODULE_SUMS" > go.sum
  export GONOSUMDB=github.com/prometheus-operator/prometheus-operator
  step "resolving one module graph for every tool"
  # etcd is not named: the graph holds the version k8s.io/kubernetes requires.
  go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" \
    "github.com/prometheus-operator/prometheus-operator/cmd/operator@$OPERATOR_VERSION" \
    "github.com/prometheus/node_exporter@$NODE_EXPORTER_VERSION" "cloud.google.com/go@$CLOUD_GO_VERSION" \
    2> get.log || { cat get.log >&2; return 1; }

  # The version each binary reports: Kubernetes' (helm checks charts' kubeVersion against it, and
  # `helm template` assumes the cluster is its client-go's), containerd's, helm's.
  local major=${K8S_VERSION%%.*} minor=${K8S_VERSION#*.} pkg ldflags="-s -w"
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags="$ldflags -X $pkg.gitTreeState=clean"
  done
  ldflags="$ldflags -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  ldflags="$ldflags -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in chartutil lint/rules; do
    ldflags="$ldflags -X helm.sh/helm/v3/pkg/$pkg.k8sVersionMajor=$major -X helm.sh/helm/v3/pkg/$pkg.k8sVersionMinor=$minor"
  done
  step "building Kubernetes $K8S_VERSION, etcd, containerd, helm and kwok"
  # shellcheck disable=SC2046  # one package per word
  go build -trimpath -ldflags "$ldflags" -o "$work/bin/" $(echo "$TOOLS" | awk '$1 !~ /^(prometheus|node_exporter)-/ {print $2}')
  mv "$work/bin/server" "$work/bin/etcd"
  # Prometheus, the operator's two and node_exporter take the version they report from one variable
  # of a shared package: a link each, of the packages compiled above.
  local name path version
  while read -r name path version; do
    case $name in prometheus-*|node_exporter-*) ;; *) continue ;; esac
    step "building $name"
    go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v}" \
      -o "$work/bin/$name" "$path"
  done <<< "$TOOLS"
  mv "$work"/bin/* "$bin/"
  echo "$BUILT" > "$out/.tools"
}

if ! tools_built; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  build_tools
  cd / && rm -rf "$work" && trap - EXIT
fi
if [ ! -x "$bin/coredns-$COREDNS_VERSION" ]; then
  step "building CoreDNS $COREDNS_VERSION ($COREDNS_PLUGINS)"
  tmp=$(mktemp -d)
  cp -r "$(module_dir "github.com/coredns/coredns@$COREDNS_VERSION")" "$tmp/coredns" && chmod -R u+w "$tmp/coredns"
  {
    printf 'package plugin\n\nimport (\n'
    for plugin in $COREDNS_PLUGINS; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$plugin"; done
    printf ')\n'
  } > "$tmp/coredns/core/plugin/zplugin.go"
  (cd "$tmp/coredns" && go build -trimpath -ldflags "-s -w" -o "$bin/coredns-$COREDNS_VERSION" .)
  rm -rf "$tmp"
fi
if [ ! -x "$bin/node_exporter-$NODE_EXPORTER_PREVIOUS_VERSION" ]; then
  step "building node_exporter $NODE_EXPORTER_PREVIOUS_VERSION"
  tmp=$(mktemp -d)
  GOBIN=$tmp go install -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${NODE_EXPORTER_PREVIOUS_VERSION#v}" \
    "github.com/prometheus/node_exporter@$NODE_EXPORTER_PREVIOUS_VERSION"
  mv "$tmp/node_exporter" "$bin/node_exporter-$NODE_EXPORTER_PREVIOUS_VERSION" && rmdir "$tmp"
fi
step "ready: $(ls "$bin" | tr '\n' ' ')"
