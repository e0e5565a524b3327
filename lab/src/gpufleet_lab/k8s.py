"""The lab's two Kubernetes clusters, as production has them: the main cluster (monitoring, the
telemetry objects) and the GPU cluster (the k3s side: operator or exporter, vLLM, Triton). Each is
real etcd, kube-apiserver, controller-manager and scheduler built from Go modules
(lab/scripts/build-lab-k8s.sh), with its own CA, kubeconfig and CRDs, and kwok simulating its nodes.

Everything listens on loopback. The API servers run with TLS, RBAC (and Node authorisation),
service-account tokens and the default admission plugins, as in a real cluster. A cluster's
state lives under .lab/k8s/<cluster>/; `down` stops the processes and removes it.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import re
import signal
import socket
import ssl
import subprocess
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from gpufleet.lib.manifests import manifest_objects

import gpufleet_lab as lab
from gpufleet_lab import REPO_ROOT, LabError, lab_dir
from gpufleet_lab import containers as labcontainers
from gpufleet_lab import dns as labdns
from gpufleet_lab import hosts as labhosts
from gpufleet_lab import image as labimage
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import nodes as labnodes
from gpufleet_lab import prerequisites as labprerequisites
from gpufleet_lab import registry as labregistry

K8S_VERSION = os.environ.get("K8S_VERSION", "1.36.3")
SERVICE_CIDR = "10.96.0.0/16"
API_ADDRESS = str(ipaddress.ip_network(lab.SUBNET)[1])  # the lab network's gateway on this machine
LOCAL_VOLUME_GIB = 10  # each real node's local PersistentVolume (the lab inventory's Prometheus asks 10Gi)
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

# Nodes of the lab clusters: named like the lab inventory's hosts. The GPU node carries what the
# GPU Operator's feature discovery and device plugin would add.
NODES: dict[str, dict[str, Any]] = {
    "m1": {"labels": {"node-role.kubernetes.io/control-plane": ""}, "capacity": {}},
    "gpu1": {
        "labels": {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H200",
            "nvidia.com/gpu.count": "4",
            "nvidia.com/gpu.memory": "143771",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/cuda.driver.major": "580",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "gpufleet.io/gpu-node": "true",
        },
        "capacity": {"nvidia.com/gpu": "4"},
    },
}


@dataclass(frozen=True)
class Cluster:
    name: str
    api_port: int
    etcd_port: int
    port_offset: int  # added to the controller-manager's, scheduler's and kwok's ports
    nodes: tuple[str, ...]


CLUSTERS = {
    "main": Cluster("main", 16443, 23790, 0, ("m1",)),
    "gpu": Cluster("gpu", 16444, 23810, 1, ("gpu1",)),
}


def bin_dir() -> Path:
    default = str(REPO_ROOT / ".cache" / "k8s" / K8S_VERSION)
    return Path(os.environ.get("GPUFLEET_K8S_DIR", default)) / "bin"


def crd_dir() -> Path:
    return bin_dir().parent / "crds"


def state_dir(cluster: str = "main") -> Path:
    return Path(lab_dir(), "k8s", cluster)


def kubeconfig_path(cluster: str = "main") -> Path:
    return state_dir(cluster) / "admin.kubeconfig"


# --- PKI -----------------------------------------------------------------------


def _write_pki(pki: Path, cluster: str) -> None:
    """CA, API server serving cert, client certs per component, service-account key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    pki.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = datetime.datetime.now(datetime.UTC)

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def save(name: str, data: bytes, mode: int = 0o600) -> None:
        path = pki / name
        path.write_bytes(data)
        path.chmod(mode)

    def authority(name: str, cn: str) -> tuple[x509.Name, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256())
        )
        save(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        save(f"{name}.key", key_pem(key))
        return subject, key

    ca_name, ca_key = authority("ca", f"gpufleet-lab-{cluster}-ca")
    # The aggregation layer's own CA, as kubeadm has it: the API server proxies to an extension API
    # server (KEDA's metrics server) with a client certificate of this CA, which that server trusts for
    # the user it names in request headers, and for nothing else.
    front_proxy = authority("front-proxy-ca", f"gpufleet-lab-{cluster}-front-proxy-ca")

    def issue(
        name: str,
        cn: str,
        org: str | None = None,
        server: list[x509.GeneralName] | None = None,
        by: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None = None,
    ) -> None:
        issuer_name, issuer_key = by or (ca_name, ca_key)
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(issuer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(server), critical=False)
            usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        cert = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).sign(issuer_key, hashes.SHA256())
        save(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        save(f"{name}.key", key_pem(key))

    service_ip = ipaddress.IPv4Network(SERVICE_CIDR)[1]  # the kubernetes Service's address
    api_names: list[x509.GeneralName] = [
        x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
    ]
    api_names += [x509.IPAddress(ipaddress.IPv4Address(a)) for a in ("127.0.0.1", API_ADDRESS, str(service_ip))]
    issue("apiserver", "kube-apiserver", server=api_names)
    issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", org="system:masters")
    for node in labnodes.nodes_of(cluster):
        issue(f"kubelet-client-{node.name}", f"system:node:{node.name}", org="system:nodes")
        node_names = [x509.DNSName(node.name), x509.IPAddress(ipaddress.IPv4Address(node.address))]
        issue(f"kubelet-{node.name}", node.name, server=node_names)
    issue("kube-proxy", "system:kube-proxy")
    issue("admin", "gpufleet-admin", org="system:masters")
    issue("controller-manager", "system:kube-controller-manager")
    issue("scheduler", "system:kube-scheduler")
    issue("kwok", "system:kwok-controller", org="system:masters")
    issue("front-proxy-client", "front-proxy-client", by=front_proxy)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    save("sa.key", key_pem(sa_key))
    save(
        "sa.pub",
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        0o644,
    )


def _kubeconfig(pki: Path, user: str, cluster: Cluster) -> str:
    name = f"gpufleet-lab-{cluster.name}"
    return f"""apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: https://{API_ADDRESS}:{cluster.api_port}
    certificate-authority: {pki}/ca.crt
users:
- name: {user}
  user:
    client-certificate: {pki}/{user}.crt
    client-key: {pki}/{user}.key
contexts:
- name: {name}
  context: {{cluster: {name}, user: {user}}}
current-context: {name}
"""


# --- processes -------------------------------------------------------------------


def _commands(state: Path, cluster: Cluster) -> dict[str, list[str]]:
    pki, b = state / "pki", bin_dir()
    api_port, etcd_port, offset = cluster.api_port, cluster.etcd_port, cluster.port_offset * 100
    return {
        "etcd": [
            str(b / "etcd"),
            f"--name={cluster.name}",
            f"--data-dir={state}/etcd",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_port + 10}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_port + 10}",
            f"--initial-cluster={cluster.name}=http://127.0.0.1:{etcd_port + 10}",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(b / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            # The lab network's gateway: the lab's nodes reach it, nothing outside the machine does.
            f"--bind-address={API_ADDRESS}",
            f"--secure-port={api_port}",
            f"--advertise-address={API_ADDRESS}",
            f"--kubelet-client-certificate={pki}/apiserver-kubelet-client.crt",
            f"--kubelet-client-key={pki}/apiserver-kubelet-client.key",
            f"--kubelet-certificate-authority={pki}/ca.crt",
            "--kubelet-preferred-address-types=InternalIP",
            f"--tls-cert-file={pki}/apiserver.crt",
            f"--tls-private-key-file={pki}/apiserver.key",
            f"--client-ca-file={pki}/ca.crt",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-key-file={pki}/sa.pub",
            f"--service-account-signing-key-file={pki}/sa.key",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--allow-privileged=true",
            # The aggregation layer (KEDA's external metrics API): requests proxied with the front
            # proxy's client certificate, straight to the extension server's pod (this API server
            # runs on the lab machine, which has routes to the pods but no kube-proxy of its own).
            f"--requestheader-client-ca-file={pki}/front-proxy-ca.crt",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki}/front-proxy-client.crt",
            f"--proxy-client-key-file={pki}/front-proxy-client.key",
            "--enable-aggregator-routing=true",
        ],
        "kube-controller-manager": [
            str(b / "kube-controller-manager"),
            f"--kubeconfig={state}/controller-manager.kubeconfig",
            f"--authentication-kubeconfig={state}/controller-manager.kubeconfig",
            f"--authorization-kubeconfig={state}/controller-manager.kubeconfig",
            "--bind-address=127.0.0.1",
            f"--secure-port={10257 + offset}",
            f"--service-account-private-key-file={pki}/sa.key",
            f"--root-ca-file={pki}/ca.crt",
            f"--cluster-signing-cert-file={pki}/ca.crt",
            f"--cluster-signing-key-file={pki}/ca.key",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--controllers=*,-nodeipam",
            # kwok's heartbeats can stall while the lab machine is busy; a short grace would
            # mark the simulated nodes NotReady and their pods unready, which nothing undoes.
            "--node-monitor-grace-period=1h",
        ],
        "kube-scheduler": [
            str(b / "kube-scheduler"),
            f"--kubeconfig={state}/scheduler.kubeconfig",
            f"--authentication-kubeconfig={state}/scheduler.kubeconfig",
            f"--authorization-kubeconfig={state}/scheduler.kubeconfig",
            "--bind-address=127.0.0.1",
            f"--secure-port={10259 + offset}",
            "--leader-elect=false",
        ],
        "kwok": [
            str(b / "kwok"),
            f"--kubeconfig={state}/kwok.kubeconfig",
            f"--config={b.parent / 'kwok-stages.yaml'}",  # lab/scripts/build-lab-k8s.sh: v0.8 has none built in
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=10.213.7.254",
            f"--server-address=127.0.0.1:{10247 + offset}",
        ],
    }


def _pid(name: str, cluster: str = "main") -> int | None:
    pidfile = state_dir(cluster) / f"{name}.pid"
    try:
        pid = int(pidfile.read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _start(name: str, argv: list[str], cluster: str) -> None:
    if _pid(name, cluster):
        return
    log = open(state_dir(cluster) / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (state_dir(cluster) / f"{name}.pid").write_text(str(proc.pid))


def _ssl_context(state: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(state / "pki" / "ca.crt"))
    ctx.load_cert_chain(str(state / "pki" / "admin.crt"), str(state / "pki" / "admin.key"))
    return ctx


def _wait_ready(state: Path, cluster: Cluster, deadline: float) -> None:
    ctx = _ssl_context(state)
    last = ""
    while time.monotonic() < deadline:
        try:
            url = f"https://{API_ADDRESS}:{cluster.api_port}/readyz"
            with urllib.request.urlopen(url, context=ctx, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.3)
    raise LabError(f"kube-apiserver not ready ({last}); see {state}/kube-apiserver.log")


def up(timeout: float = 180) -> Path:
    """Start both clusters (building nothing: run lab/scripts/build-lab-k8s.sh first); return the main
    cluster's kubeconfig (the GPU cluster's is kubeconfig_path("gpu")). `timeout` is for the control
    planes, and again for the real nodes once their images are built (a clean checkout builds them
    first: on a busy 2-core machine that took the whole of a single deadline, and a node was marked
    Ready just after it)."""
    missing = [c for c in COMPONENTS if not (bin_dir() / c).exists()]
    if missing:
        raise LabError(f"missing {', '.join(missing)} in {bin_dir()}: run lab/scripts/build-lab-k8s.sh")
    deadline = time.monotonic() + timeout
    # The real nodes' containers first: the first container on the lab network brings up the
    # bridge whose address the API servers listen on.
    labcontainers.ensure_network()
    image = labimage.ensure_image()
    pubkey = labhosts.ensure_ssh_key().with_suffix(".pub")
    for node in labinventory.REAL_NODES:
        labnodes.start_container(node, image, pubkey)
        _route_pods(node)
    for cluster in CLUSTERS.values():
        _start_control_plane(cluster)
    for cluster in CLUSTERS.values():
        state = state_dir(cluster.name)
        _wait_ready(state, cluster, deadline)
        commands = _commands(state, cluster)
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            _start(name, commands[name], cluster.name)
    for cluster in CLUSTERS.values():
        _ensure_nodes_and_crds(cluster, deadline)
    archives = labnodes.build_images(bin_dir())
    deadline = time.monotonic() + timeout
    labregistry.up(archives, deadline)
    for node in labinventory.REAL_NODES:
        _join_real_node(CLUSTERS[node.cluster], node, archives, deadline)
    labcontainers.pin_host_keys(labinventory.REAL_NODES, deadline)
    # A component that exited (a port taken, say) would otherwise show only as a timeout later.
    dead = [(c, n) for c in CLUSTERS for n in COMPONENTS if not _pid(n, c)]
    if dead:
        first, name = dead[0]
        last = (state_dir(first) / f"{name}.log").read_text().strip().splitlines()
        names = ", ".join(f"{c}/{n}" for c, n in dead)
        raise LabError(f"{names} exited; {first}/{name}'s log ends: {last[-1] if last else '(empty)'}")
    return kubeconfig_path("main")


def _route_pods(node: labinventory.RealNode, add: bool = True) -> None:
    """The node's pod subnet, routed from the lab machine through the node: the API servers run here,
    and reach an extension API server's pod (KEDA's metrics server) as a control plane on a flat pod
    network does."""
    verb = ("replace", node.pod_subnet, "via", node.address) if add else ("del", node.pod_subnet)
    subprocess.run(["ip", "route", *verb], check=add, capture_output=True)


def _start_control_plane(cluster: Cluster) -> None:
    state = state_dir(cluster.name)
    state.mkdir(parents=True, exist_ok=True)
    pki = state / "pki"
    if not (pki / "ca.crt").exists():
        _write_pki(pki, cluster.name)
    for user in ("admin", "controller-manager", "scheduler", "kwok"):
        path = state / f"{user}.kubeconfig"
        path.write_text(_kubeconfig(pki, user, cluster))
        path.chmod(0o600)
    if not _pid("etcd", cluster.name):
        for port in (cluster.api_port, cluster.etcd_port):
            with socket.socket() as probe:
                if probe.connect_ex((API_ADDRESS if port == cluster.api_port else "127.0.0.1", port)) == 0:
                    raise LabError(
                        f"port {port} is taken by another control plane (another checkout's lab?):"
                        " stop it there with `gpufleet lab down`"
                    )
    commands = _commands(state, cluster)
    _start("etcd", commands["etcd"], cluster.name)
    _start("kube-apiserver", commands["kube-apiserver"], cluster.name)


def _join_real_node(cluster: Cluster, node: labinventory.RealNode, archives: dict[str, Path], deadline: float) -> None:
    """Make the cluster's real node run: its certificates and configuration, containerd, kubelet
    and kube-proxy, the lab's images; then wait until it is Ready. A Ready node is left alone."""
    from kubernetes import client, config

    core: Any = client.CoreV1Api(config.new_client_from_config(str(kubeconfig_path(cluster.name))))  # type: ignore[no-untyped-call]
    active = labnodes.in_node(node, "systemctl is-active kubelet containerd", check=False).returncode == 0
    try:
        ready = active and any(
            c.type == "Ready" and c.status == "True" for c in core.read_node(node.name).status.conditions or []
        )
    except client.exceptions.ApiException:
        ready = False
    _local_volume(core, node)
    if ready:
        _node_images(node, archives, new_node=False)
    else:
        _install_node(cluster, node, archives, deadline, core)
    if node.cluster == "gpu":
        _advertise_gpu(core, node)


def _install_node(
    cluster: Cluster, node: labinventory.RealNode, archives: dict[str, Path], deadline: float, core: Any
) -> None:
    pki = state_dir(cluster.name) / "pki"

    def kubeconfig(user: str) -> str:
        data = {k: base64.b64encode((pki / f).read_bytes()).decode() for k, f in
                (("ca", "ca.crt"), ("crt", f"{user}.crt"), ("key", f"{user}.key"))}  # fmt: skip
        return f"""apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {{server: "https://{API_ADDRESS}:{cluster.api_port}", certificate-authority-data: {data["ca"]}}}
users:
- name: {user}
  user: {{client-certificate-data: {data["crt"]}, client-key-data: {data["key"]}}}
contexts:
- name: lab
  context: {{cluster: lab, user: {user}}}
current-context: lab
"""

    files: dict[str, tuple[str | bytes, int]] = {
        "/etc/kubernetes/pki/ca.crt": ((pki / "ca.crt").read_bytes(), 0o644),
        "/etc/kubernetes/pki/kubelet.crt": ((pki / f"kubelet-{node.name}.crt").read_bytes(), 0o644),
        "/etc/kubernetes/pki/kubelet.key": ((pki / f"kubelet-{node.name}.key").read_bytes(), 0o600),
        "/etc/kubernetes/kubelet.kubeconfig": (kubeconfig(f"kubelet-client-{node.name}"), 0o600),
        "/etc/kubernetes/kube-proxy.kubeconfig": (kubeconfig("kube-proxy"), 0o600),
        "/etc/kubernetes/kubelet.yaml": (labnodes.kubelet_config(labdns.address(SERVICE_CIDR)), 0o644),
        "/etc/kubernetes/kube-proxy.yaml": (labnodes.kube_proxy_config(), 0o644),
        "/etc/containerd/config.toml": (labnodes.containerd_config(), 0o644),
        "/etc/cni/net.d/10-lab-pods.conflist": (labnodes.cni_config(node), 0o644),
        **{f"/etc/systemd/system/{unit}": (text, 0o644) for unit, text in labnodes.units(node).items()},
    }
    labnodes.install(node, files, bin_dir())
    _node_images(node, archives, new_node=True)
    labnodes.wait_ready(core, node, deadline)


def _node_images(node: labinventory.RealNode, archives: dict[str, Path], new_node: bool) -> None:
    """The images the lab builds for the charts and the pod sandbox are pre-pulled (imported), as
    no registry serves them. The main job's own (vLLM's and dcgm-exporter's stand-ins, published to
    the upstream registry stand-in) are not: its pods pull them through the fleet's mirror, layers
    and all, as on a production node. A node installed anew drops any copy that its containerd's
    volume kept (the volume outlives a container replaced without `lab down`)."""
    published = {name: archives[name] for name in labregistry.PUBLISHED}
    labnodes.import_images(node, {name: a for name, a in archives.items() if name not in published})
    labnodes.forget_images(node, published, labregistry.PULLED_AS, everything=new_node)


def _advertise_gpu(core: Any, node: labinventory.RealNode) -> None:
    """Four nvidia.com/gpu in the GPU cluster's real node's capacity (as the simulated GPU node has),
    so that pods asking for a GPU (the vllm role's) are scheduled there, several replicas of them
    when serving scales out: a STAND-IN for NVIDIA's device plugin (no GPU here), through the node
    status extended resources are advertised with."""
    core.patch_node_status(node.name, {"status": {"capacity": {labnodes.GPU_RESOURCE: "4"}}})


def _local_volume(core: Any, node: labinventory.RealNode) -> None:
    """A local PersistentVolume of the lab-local StorageClass on a real node, as a cluster's static
    local volumes are: the main cluster's Prometheus keeps its TSDB there across restarts. Retained
    when its claim goes (the data too): delete the PV to start afresh."""
    path = f"/var/lib/gpufleet-lab/volumes/{LOCAL_VOLUME_GIB}g"
    labnodes.in_node(node, f"mkdir -p {path}")
    node_term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node.name]}]}
    _create_once(
        core.create_persistent_volume,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"lab-local-{node.name}"},
            "spec": {
                "capacity": {"storage": f"{LOCAL_VOLUME_GIB}Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "lab-local",
                "local": {"path": path},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [node_term]}},
            },
        },
    )


def _create_once(create: Any, body: dict[str, Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        create(body)
    except ApiException as exc:
        if exc.status != 409:  # already there
            raise


def starting_crds(cluster: Cluster) -> list[dict[str, Any]]:
    """The CRDs a cluster starts with, as if installed there: the main cluster the Prometheus
    Operator's, from the pinned kube-prometheus-stack chart's CRD folder (the monitoring role then
    applies its own chart's); the GPU cluster KServe's, from its module (lab/scripts/build-lab-k8s.sh)."""
    if cluster.name == "gpu":
        return [yaml.safe_load(path.read_text()) for path in sorted(crd_dir().glob("serving.kserve.io_*.yaml"))]
    with tarfile.open(labprerequisites.charts_dir() / labprerequisites.LAB_CHARTS[0]) as chart:
        return [
            crd
            for member in chart.getmembers()
            if re.fullmatch(r"[^/]+/charts/crds/crds/crd-[a-z]+\.yaml", member.name)
            for crd in manifest_objects(chart.extractfile(member).read(), "CustomResourceDefinition")  # type: ignore[union-attr]
        ]


def _ensure_nodes_and_crds(cluster: Cluster, deadline: float) -> None:
    from kubernetes import client, config, utils

    api_client = config.new_client_from_config(str(kubeconfig_path(cluster.name)))  # type: ignore[no-untyped-call]
    core: Any = client.CoreV1Api(api_client)
    for name in cluster.nodes:
        spec = NODES[name]
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **spec["labels"],
                },
            },
            "status": {
                "capacity": {"cpu": "16", "memory": "128Gi", "pods": "110", **spec["capacity"]},
                "allocatable": {"cpu": "16", "memory": "128Gi", "pods": "110", **spec["capacity"]},
            },
        }
        _create_once(core.create_node, body)
    # The cluster's DNS, on its first real node (kwok's simulated ones run no process); made once
    # (its Service's fixed address answers a second create with 422, not 409).
    try:
        core.read_namespaced_service("kube-dns", "kube-system")
    except client.exceptions.ApiException:
        for body in labdns.objects(SERVICE_CIDR, labnodes.nodes_of(cluster.name)[0].name):
            utils.create_from_dict(api_client, body)  # type: ignore[no-untyped-call]
    # k3s creates the nvidia RuntimeClass when it finds the NVIDIA runtime; so does the lab's GPU cluster.
    if cluster.name == "gpu":
        _create_once(
            client.NodeV1Api(api_client).create_runtime_class,
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "nvidia"},
                "handler": "nvidia",
            },
        )
    # A StorageClass, as every production cluster has one: the monitoring role checks that the class
    # of Prometheus's volume exists. No provisioner: each real node has a static local volume.
    _create_once(
        client.StorageV1Api(api_client).create_storage_class,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "lab-local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    for crd in starting_crds(cluster):
        try:
            utils.create_from_dict(api_client, crd)  # type: ignore[no-untyped-call]
        except utils.FailToCreateError as exc:
            if any(e.status != 409 for e in exc.api_exceptions):
                raise
    while time.monotonic() < deadline:
        ready = [
            n.metadata.name
            for n in core.list_node().items
            if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
        ]
        if set(cluster.nodes) <= set(ready):
            return
        time.sleep(0.3)
    raise LabError(f"kwok did not make nodes Ready; see {state_dir(cluster.name)}/kwok.log")


def down() -> list[str]:
    stopped = []
    for cluster in CLUSTERS:
        for name in reversed(COMPONENTS):
            pid = _pid(name, cluster)
            if pid:
                os.killpg(pid, signal.SIGTERM)
                stopped.append(f"{cluster}/{name}")
    deadline = time.monotonic() + 15
    while any(_pid(n, c) for c in CLUSTERS for n in COMPONENTS) and time.monotonic() < deadline:
        time.sleep(0.1)
    for cluster in CLUSTERS:
        for name in COMPONENTS:
            pid = _pid(name, cluster)
            if pid:
                os.killpg(pid, signal.SIGKILL)
    for node in labinventory.REAL_NODES:
        labcontainers.podman("rm", "-f", "-t", "2", node.container, check=False)
        labcontainers.podman("volume", "rm", "-f", labnodes.containerd_volume(node), check=False)
        _route_pods(node, add=False)
    k8s = Path(lab_dir(), "k8s")
    if k8s.exists():
        subprocess.run(["rm", "-rf", str(k8s)], check=True)
    return stopped


def remove_plain_hosts() -> list[str]:
    """Remove the lab containers that are neither the clusters' nodes nor the upstream registry (a
    scale lab's hosts); return their names."""
    kept = {node.container for node in labinventory.REAL_NODES} | {labregistry.CONTAINER}
    plain = [name for name in labcontainers.running_hosts() if name not in kept]
    if plain:
        labcontainers.podman("rm", "-f", "-t", "2", *plain)
    return plain


def status() -> dict[str, bool]:
    return {f"{cluster}/{name}": _pid(name, cluster) is not None for cluster in CLUSTERS for name in COMPONENTS}
