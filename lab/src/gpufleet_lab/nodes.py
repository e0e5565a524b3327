"""Nodes that run pods for real in the lab's two clusters: systemd containers with containerd 2.x,
kubelet and kube-proxy built from Go modules (lab/scripts/build-lab-k8s.sh), runc and the CNI plugins from
Debian. They are the lab inventory's hosts. kwok's simulated nodes stay beside them for what cannot
run here (the GPU Operator's operands: NVIDIA's images).

A real node carries the taint `gpufleet.io/lab-kubelet=true:NoSchedule`: only pods that tolerate it
run there, so what has no image here stays on kwok's nodes.

Pods get their images from the node's containerd. The lab's images (the pod sandbox, the
calibration server) are built here by `images()` and imported into each node at join.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import gpufleet_lab as lab
from gpufleet import calibration_server
from gpufleet_lab import containers as labcontainers
from gpufleet_lab import dns as labdns
from gpufleet_lab import image as labimage
from gpufleet_lab.inventory import REAL_NODES, RealNode

CONTAINERD_VERSION = "v2.3.7"
TAINT = {"key": "gpufleet.io/lab-kubelet", "value": "true", "effect": "NoSchedule"}
# What containerd, runc, the CNI plugins and kube-proxy need in a node: Debian's packages.
NODE_PACKAGES = ("runc", "containernetworking-plugins", "iptables", "conntrack")
NODE_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr", "kubelet", "kube-proxy")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CALIBRATION_IMAGE = "localhost/gpufleet-lab/calibration-server:1"
# The lab's dcgm-exporter image: the FIXTURE exporter (no GPU here), run by the dcgm_exporter role's
# DaemonSet with dcgm-exporter's own flags and environment.
DCGM_FIXTURE_IMAGE = "localhost/gpufleet-lab/dcgm-exporter-fixture:1"
DCGM_FIXTURE_EXPORTER = lab.LAB_ROOT / "roles/lab_dcgm_fixture_exporter/files/dcgm_fixture_exporter.py"
# The image of a canary's benchmark step, built from the product's own Containerfile on the lab's base.
CANARY_BENCH_IMAGE = "localhost/gpufleet-lab/canary-bench:1"
CANARY_BENCH_CONTAINERFILE = lab.REPO_ROOT / "images/canary-bench/Containerfile"
CANARY_BENCH_PACKAGE = lab.REPO_ROOT / "plugins/module_utils/llm_bench"
# The lab's DRA driver (lab/dra-driver, a FIXTURE stand-in for NVIDIA's), run by lab/src/gpufleet_lab/dra.py.
DRA_DRIVER_IMAGE = "localhost/gpufleet-lab/dra-driver-fixture:1"
DRA_DRIVER_BINARY = "gpufleet-lab-dra-driver"
POD_CIDR = "10.244.0.0/16"
IMAGE_STAMPS = "/var/lib/gpufleet-lab/images"
# What the GPU cluster's real nodes advertise, one each (labk8s._advertise_gpu): the device plugin's name.
GPU_RESOURCE = "nvidia.com/gpu"
# Images built here from upstream's Go modules (lab/scripts/build-lab-k8s.sh), at the versions the pinned
# kube-prometheus-stack deploys: the binary's name, the chart's repository and the entrypoint.
UPSTREAM_IMAGES = {
    "node_exporter": ("quay.io/prometheus/node-exporter", "/bin/node_exporter"),
    "prometheus": ("quay.io/prometheus/prometheus", "/bin/prometheus"),
    "prometheus-operator": ("quay.io/prometheus-operator/prometheus-operator", "/bin/operator"),
    "prometheus-config-reloader": (
        "quay.io/prometheus-operator/prometheus-config-reloader",
        "/bin/prometheus-config-reloader",
    ),
    # KEDA's images are tagged with the version without its v (the chart's appVersion).
    "keda": ("ghcr.io/kedacore/keda", "/keda"),
    "keda-adapter": ("ghcr.io/kedacore/keda-metrics-apiserver", "/keda-adapter"),
    "keda-admission-webhooks": ("ghcr.io/kedacore/keda-admission-webhooks", "/keda-admission-webhooks"),
    "argo-rollouts": ("quay.io/argoproj/argo-rollouts", "/bin/rollouts-controller"),
    "coredns": ("registry.k8s.io/coredns/coredns", "/coredns"),
}
UNPREFIXED_TAGS = ("ghcr.io/kedacore/",)
# Upstream's images that run as a user of their own (their charts ask for runAsNonRoot): distroless's nonroot.
NONROOT_IMAGES = ("ghcr.io/kedacore/", "quay.io/argoproj/")


def nodes_of(cluster: str) -> list[RealNode]:
    return [n for n in REAL_NODES if n.cluster == cluster]


def containerd_config() -> str:
    # The sandbox image is pinned, so the kubelet's image garbage collection never removes it.
    return f"""version = 3
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.cri.v1.runtime"]
  # This machine withholds CAP_SYS_RESOURCE even from root: no process may lower its OOM score
  # below containerd's own, as the kubelet asks for sandboxes (-998) and Guaranteed pods (-997).
  restrict_oom_score_adj = true
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "/etc/cni/net.d"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
# The handler of the nvidia RuntimeClass: runc here, since the lab has no GPU (a stand-in for the
# NVIDIA runtime that the container toolkit configures on a GPU node).
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
"""


def cni_config(node: RealNode) -> str:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "lab-pods",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": True,
                    "hairpinMode": True,
                    # A default route through the bridge: pods reach Services (the API server's
                    # among them) and the lab network, not only their own subnet.
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": node.pod_subnet}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def kubelet_config(cluster_dns: str) -> str:
    return f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: /etc/kubernetes/pki/ca.crt}}
authorization: {{mode: Webhook}}
tlsCertFile: /etc/kubernetes/pki/kubelet.crt
tlsPrivateKeyFile: /etc/kubernetes/pki/kubelet.key
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
# This machine runs cgroup v1, which kubelet 1.35 and later refuse unless told.
failCgroupV1: false
failSwapOn: false
# The node shares the machine's disk with everything else: evict only when it is really full.
evictionHard: {{memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
# The cluster's DNS (dns.py's CoreDNS); what it does not hold goes to the node's resolver.
clusterDNS: [{cluster_dns}]
clusterDomain: {labdns.DOMAIN}
resolvConf: /etc/resolv.conf
# Mounted Secrets and ConfigMaps are refreshed at a pod's sync (every minute by default), so a
# ServiceMonitor change reaches the operator's Prometheus a minute or two later; sooner here.
syncFrequency: 10s
"""


def kube_proxy_config() -> str:
    # maxPerCore 0: leave nf_conntrack_max (not namespaced) to the machine.
    return f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: /etc/kubernetes/kube-proxy.kubeconfig}}
mode: iptables
clusterCIDR: {POD_CIDR}
conntrack: {{maxPerCore: 0}}
"""


def units(node: RealNode) -> dict[str, str]:
    return {
        "containerd.service": """[Unit]
Description=containerd (lab node)
After=network.target
[Service]
# notify: systemctl returns once containerd serves its socket, not when the process starts
# (images imported right after a restart otherwise race its startup).
Type=notify
# Pods that mount the node's root with propagation (node-exporter's HostToContainer) need it shared.
ExecStartPre=/bin/mount --make-rshared /
ExecStart=/usr/local/bin/containerd
Delegate=yes
KillMode=process
Restart=always
RestartSec=2
LimitNOFILE=infinity
[Install]
WantedBy=multi-user.target
""",
        "kubelet.service": f"""[Unit]
Description=kubelet (lab node)
After=containerd.service
Requires=containerd.service
[Service]
ExecStart=/usr/local/bin/kubelet --config=/etc/kubernetes/kubelet.yaml \\
  --kubeconfig=/etc/kubernetes/kubelet.kubeconfig --hostname-override={node.name} --node-ip={node.address} \\
  --register-with-taints={TAINT["key"]}={TAINT["value"]}:{TAINT["effect"]} --node-labels={TAINT["key"]}=true
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
""",
        "kube-proxy.service": """[Unit]
Description=kube-proxy (lab node)
After=network.target
[Service]
ExecStart=/usr/local/bin/kube-proxy --config=/etc/kubernetes/kube-proxy.yaml
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
""",
    }


def containerd_volume(node: RealNode) -> str:
    """The podman volume that holds the node's containerd state (overlayfs cannot stack on the container's)."""
    return f"{node.container}-containerd"


def start_container(node: RealNode, image: str, pubkey: Path) -> None:
    """A privileged systemd container with its own cgroup namespace (the kubelet manages cgroups
    under it) and containerd's state on a volume (overlayfs cannot stack on the container's).
    Ansible logs in over SSH with the lab's key, as on the lab's hosts, for what runs on a node
    itself (the telemetry tunnel's ends)."""
    state = labcontainers.running_hosts().get(node.container)
    if state is not None and labcontainers.container_key(node) != labcontainers.key_id(pubkey):
        labcontainers.podman("rm", "-f", "-t", "2", node.container)  # another checkout's key: no login
        state = None
    if state == "running":
        return
    if state is not None:
        # Measured here: starting a node's container again (cgroup v1, podman's shared name=systemd
        # hierarchy) removed the running nodes' cgroups there, and nothing could start in them after.
        raise lab.LabError(
            f"{node.container} is {state}: a lab node's container cannot be started again on this machine"
            " without breaking the other nodes. Run `gpufleet lab down`, then `gpufleet lab up`"
        )
    # A new node's containerd starts empty, as a freshly installed node's. A volume left by a replaced
    # container (another checkout's lab, the machine restarted under a lab) holds the old pods'
    # containers and their snapshots, and containerd's unpacker skips fetching a layer whose snapshot
    # it has: the likely cause of a first pull through the fleet's mirror that took the manifests only
    # (test_images in stop 42's CI, after a lab left up on this machine).
    labcontainers.podman("volume", "rm", "-f", containerd_volume(node), check=False)
    labcontainers.podman(
        "run", "-d", "--name", node.container, "--hostname", node.name,
        "--network", lab.NETWORK, "--ip", node.address, "--mac-address", labcontainers.mac_of(node.address),
        "--systemd=always", "--privileged", "--cgroupns=private",
        "--label", "io.gpufleet.lab=1", "--label", f"{lab.KEY_LABEL}={labcontainers.key_id(pubkey)}",
        "-v", f"{pubkey}:/root/.ssh/authorized_keys:ro",
        "-v", f"{containerd_volume(node)}:/var/lib/containerd",
        image, "/sbin/init",
    )  # fmt: skip


def in_node(node: RealNode, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc: subprocess.CompletedProcess[str] = labcontainers.podman(
        "exec", node.container, "sh", "-c", command, check=False
    )
    if check and proc.returncode != 0:
        raise lab.LabError(f"{node.name}: {command.split()[0]} failed: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc


def install(node: RealNode, files: dict[str, tuple[str | bytes, int]], binaries: Path) -> None:
    """Lay the node's packages, binaries, configuration and units down, then start them."""
    missing = in_node(node, "dpkg-query -W -f='${Status}\\n' " + " ".join(NODE_PACKAGES), check=False)
    if missing.returncode != 0 or missing.stdout.count("install ok installed") < len(NODE_PACKAGES):
        in_node(node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq " + " ".join(NODE_PACKAGES))
    with tempfile.TemporaryDirectory(prefix="gpufleet-node-") as tmp:
        root = Path(tmp)
        for path, (content, mode) in files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content if isinstance(content, bytes) else content.encode())
            target.chmod(mode)
        for name in NODE_BINARIES:
            target = root / "usr/local/bin" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((binaries / name).read_bytes())
            target.chmod(0o755)
        labcontainers.podman("cp", f"{root}/.", f"{node.container}:/")
    # A restart, not a start: a node container left by another lab (another checkout, an earlier
    # control plane) runs with that lab's certificates.
    services = "containerd kubelet kube-proxy"
    in_node(node, f"systemctl daemon-reload && systemctl enable {services} && systemctl restart {services}")


def _stamps(node: RealNode) -> dict[str, str]:
    """Which build of each archive the node last saw: its archive's mtime, by archive name."""
    listing = in_node(node, f"cat {IMAGE_STAMPS}/* 2>/dev/null", check=False).stdout
    return dict(line.split(" ", 1) for line in listing.splitlines() if " " in line)


def _stamp(archive: Path) -> str:
    return str(archive.stat().st_mtime_ns)


def _record(archive: Path) -> str:
    return f"mkdir -p {IMAGE_STAMPS} && echo '{archive.name} {_stamp(archive)}' > {IMAGE_STAMPS}/{archive.name}"


def import_images(node: RealNode, archives: dict[str, Path]) -> None:
    """Put these images into the node's containerd, as a pre-pull would (pods find them present).
    One rebuilt since (the same name, a newer archive) is imported again."""
    held = set(in_node(node, "ctr -n k8s.io images ls -q").stdout.split())
    stamps = _stamps(node)
    for name, archive in archives.items():
        if name not in held or stamps.get(archive.name) != _stamp(archive):
            labcontainers.podman("cp", str(archive), f"{node.container}:/tmp/{archive.name}")
            in_node(node, f"ctr -n k8s.io images import /tmp/{archive.name} >/dev/null && rm /tmp/{archive.name}"
                          f" && {_record(archive)}")  # fmt: skip


def forget_images(node: RealNode, archives: dict[str, Path], pulled_as: dict[str, str], everything: bool) -> None:
    """Remove these images from the node's containerd, under their names and the names they are
    pulled as (`pulled_as`), with the content no other image holds: all of them (`everything`: a
    new node holds no workload image, though its containerd outlives its container, a volume), or
    those rebuilt since the node last saw them, so that the next pull fetches this build."""
    stamps = _stamps(node)
    gone = [name for name, archive in archives.items() if everything or stamps.get(archive.name) != _stamp(archive)]
    if gone:
        names = " ".join(sorted({*gone, *(pulled_as[name] for name in gone if name in pulled_as)}))
        # --sync: the content store's garbage is collected before the command returns.
        in_node(node, f"ctr -n k8s.io images rm --sync {names} >/dev/null 2>&1;"
                      f" {' && '.join(_record(archives[name]) for name in gone)}")  # fmt: skip


def wait_ready(core: Any, node: RealNode, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            found = core.read_node(node.name)
        except Exception:  # not registered yet
            found = None
        conditions = {c.type: c for c in (found.status.conditions or [])} if found else {}
        if "Ready" in conditions and conditions["Ready"].status == "True":
            return
        time.sleep(0.5)
    journal = in_node(node, "journalctl -u kubelet -n 5 --no-pager", check=False).stdout.strip()
    raise lab.LabError(f"{node.name} is not Ready in the {node.cluster} cluster; kubelet's journal ends:\n{journal}")


# The lab's vLLM and Triton image: the CALIBRATION SERVER (no model, no GPU), started by the vllm role's
# own command line (`vllm serve MODEL --served-model-name N --host H --port P --max-num-seqs S
# --shutdown-timeout T ...`; the stand-in's own --stand-in-ttft S and --stand-in-fail-every N, given
# through vllm_extra_args, make a version slower or failing, as a canary drill needs) or the triton
# role's (`tritonserver --model-repository=R --exit-timeout-secs=T ...`: the first model of the
# repository, its first instance count as the slots, the metrics port 8002 beside 8000, and a model
# config's parameter stand_in_fail_every, a failing version for a canary drill); the rest is ignored.
# As NVIDIA's image does, the entrypoint runs the command it is given; with flags alone it is the
# calibration server.
CALIBRATION_CONTAINERFILE = """\
FROM {base}
COPY calibration_server.py /opt/gpufleet/calibration_server.py
RUN printf '%s\\n' '#!/bin/sh' \\
  '[ "$1" = serve ] || {{ echo "the lab vllm stand-in only serves" >&2; exit 2; }}' \\
  'shift; model=$1; shift; host=0.0.0.0; port=8000; seqs=0; drain=0; ttft=0.1; fail=0' \\
  'while [ $# -gt 0 ]; do case $1 in' \\
  '  --served-model-name) model=$2; shift;; --host) host=$2; shift;; --port) port=$2; shift;;' \\
  '  --max-num-seqs) seqs=$2; shift;; --shutdown-timeout) drain=$2; shift;;' \\
  '  --stand-in-ttft) ttft=$2; shift;; --stand-in-fail-every) fail=$2; shift;;' \\
  'esac; shift; done' \\
  'exec python3 /opt/gpufleet/calibration_server.py --host "$host" --port "$port" --model "$model" \\
    --max-num-seqs "$seqs" --shutdown-timeout "$drain" --ttft "$ttft" --fail-every "$fail"' \\
  > /usr/local/bin/vllm && chmod 755 /usr/local/bin/vllm
RUN printf '%s\\n' '#!/bin/sh' \\
  'repo=/models; drain=30' \\
  'for a in "$@"; do case $a in' \\
  '  --model-repository=*) repo=${{a#*=}};; --exit-timeout-secs=*) drain=${{a#*=}};;' \\
  'esac; done' \\
  'model=$(ls "$repo" 2>/dev/null | head -n 1)' \\
  'instances=$(grep -ho "count: *[0-9]*" "$repo/$model/config.pbtxt" 2>/dev/null | head -n 1 | tr -dc 0-9)' \\
  'fail=$(cat "$repo/$model/config.pbtxt" 2>/dev/null | tr -d " \\n" \\
    | grep -o "key:\\"stand_in_fail_every\\"value{{string_value:\\"[0-9]*" | tr -dc 0-9)' \\
  'exec python3 /opt/gpufleet/calibration_server.py --host 0.0.0.0 --port 8000 --metrics-port 8002 \\
    --model "${{model:-calibration}}" --max-num-seqs "${{instances:-1}}" --shutdown-timeout "$drain" \\
    --fail-every "${{fail:-0}}"' \\
  > /usr/local/bin/tritonserver && chmod 755 /usr/local/bin/tritonserver
RUN printf '%s\\n' '#!/bin/sh' \\
  'case $1 in vllm | tritonserver) exec "$@";; esac' \\
  'exec python3 /opt/gpufleet/calibration_server.py "$@"' \\
  > /usr/local/bin/stand-in && chmod 755 /usr/local/bin/stand-in
ENTRYPOINT ["/usr/local/bin/stand-in"]
"""
# dcgm-exporter's flags (-f counters file, -c interval) and environment (DCGM_EXPORTER_LISTEN, NODE_NAME),
# read into the FIXTURE exporter's.
DCGM_FIXTURE_CONTAINERFILE = """\
FROM {base}
COPY dcgm_fixture_exporter.py /opt/gpufleet/dcgm_fixture_exporter.py
RUN printf '%s\\n' '#!/bin/sh' \\
  'while getopts f:c: flag; do [ "$flag" = f ] && counters=$OPTARG; done' \\
  'exec python3 /opt/gpufleet/dcgm_fixture_exporter.py --counters "$counters" \\
    --listen "0.0.0.0${{DCGM_EXPORTER_LISTEN:-:9400}}" --node-name "$NODE_NAME"' \\
  > /usr/local/bin/dcgm-exporter && chmod 755 /usr/local/bin/dcgm-exporter
ENTRYPOINT ["/usr/local/bin/dcgm-exporter"]
"""


def _stale(archive: Path, *sources: Path) -> bool:
    return not archive.exists() or any(s.stat().st_mtime > archive.stat().st_mtime for s in sources)


def _binary_image(name: str, binary: Path, path: str, archive: Path) -> None:
    """An image of one static binary, its entrypoint (and its user, as upstream's image has it),
    saved as an archive for containerd."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-image-") as tmp:
        target = Path(tmp) / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(binary.read_bytes())
        target.chmod(0o755)
        tar = subprocess.Popen(["tar", "-C", tmp, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["podman", "import", "--change", f'ENTRYPOINT ["{path}"]',
             *(["--change", "USER 65532:65532"] if name.startswith(NONROOT_IMAGES) else []), "-", name],
            stdin=tar.stdout, env=labcontainers.podman_env(), check=True, capture_output=True,
        )  # fmt: skip
        tar.wait()
    labcontainers.podman("save", "--format", "oci-archive", "-o", str(archive), name)


def build_images(binaries: Path) -> dict[str, Path]:
    """The lab's images, as archives under .lab/images (rebuilt when their sources change), named
    as the charts and containerd ask for them: the pod sandbox (the lab's pause), node_exporter,
    Prometheus, the Prometheus Operator and its config-reloader at the pinned charts' versions, and
    the calibration server."""
    out = lab.lab_dir() / "images"
    out.mkdir(parents=True, exist_ok=True)
    archives: dict[str, Path] = {}
    static = {PAUSE_IMAGE: (binaries / "pause", "/pause")}
    if (binaries / DRA_DRIVER_BINARY).exists():
        static[DRA_DRIVER_IMAGE] = (binaries / DRA_DRIVER_BINARY, "/dra-driver")
    # Each built binary named <command>-v<version> becomes the image the chart names, as upstream builds it.
    for binary in sorted(binaries.glob("*-v*")):
        command, version = binary.name.rsplit("-", 1)
        if command in UPSTREAM_IMAGES:
            repository, path = UPSTREAM_IMAGES[command]
            tag = version.removeprefix("v") if repository.startswith(UNPREFIXED_TAGS) else version
            static[f"{repository}:{tag}"] = (binary, path)
    for name, (binary, path) in static.items():
        archives[name] = out / (name.rsplit("/", 1)[1].replace(":", "-") + ".tar")
        if _stale(archives[name], binary, Path(__file__)):  # the binary, or how its image is made
            _binary_image(name, binary, path, archives[name])
    for name, source, containerfile in (
        (CALIBRATION_IMAGE, Path(calibration_server.__file__), CALIBRATION_CONTAINERFILE),
        (DCGM_FIXTURE_IMAGE, DCGM_FIXTURE_EXPORTER, DCGM_FIXTURE_CONTAINERFILE),
    ):
        archives[name] = out / (name.rsplit("/", 1)[1].replace(":", "-") + ".tar")
        # Rebuilt when the script or its Containerfile (in this file) changes.
        if _stale(archives[name], source, Path(__file__)):
            _python_image(name, source, containerfile, archives[name])
    archives[CANARY_BENCH_IMAGE] = out / "canary-bench-1.tar"
    package = sorted(CANARY_BENCH_PACKAGE.glob("*.py"))
    if _stale(archives[CANARY_BENCH_IMAGE], CANARY_BENCH_CONTAINERFILE, *package):
        _canary_bench_image(package, archives[CANARY_BENCH_IMAGE])
    return archives


def _canary_bench_image(package: list[Path], archive: Path) -> None:
    """The product's canary-bench image (images/canary-bench/Containerfile), built on the lab's base from a
    context of the files it copies alone."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-image-") as tmp:
        target = Path(tmp) / CANARY_BENCH_PACKAGE.relative_to(lab.REPO_ROOT)
        target.mkdir(parents=True)
        for source in package:
            (target / source.name).write_bytes(source.read_bytes())
        labcontainers.podman("build", "-q", "-t", CANARY_BENCH_IMAGE, "-f", str(CANARY_BENCH_CONTAINERFILE),
                             "--build-arg", f"BASE={labimage.ensure_image(log=False)}", tmp)  # fmt: skip
    labcontainers.podman("save", "--format", "oci-archive", "-o", str(archive), CANARY_BENCH_IMAGE)


def _python_image(name: str, source: Path, containerfile: str, archive: Path) -> None:
    """An image of one script on the lab's Debian base, saved as an archive for containerd."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-image-") as tmp:
        (Path(tmp) / source.name).write_bytes(source.read_bytes())
        (Path(tmp) / "Containerfile").write_text(containerfile.format(base=labimage.ensure_image(log=False)))
        labcontainers.podman("build", "-q", "-t", name, "-f", f"{tmp}/Containerfile", tmp)
    labcontainers.podman("save", "--format", "oci-archive", "-o", str(archive), name)
