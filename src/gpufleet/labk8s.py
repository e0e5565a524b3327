"""The lab's Kubernetes control plane: real etcd, kube-apiserver, controller-manager and
scheduler built from Go modules (scripts/build-lab-k8s.sh), with kwok simulating nodes.

Everything listens on loopback. The API server runs with TLS, RBAC (and Node
authorisation), service-account tokens and the default admission plugins, as in a
real cluster. Its state lives under .lab/k8s/; `down` stops the processes and
removes it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from gpufleet.lab import REPO_ROOT, LabError, lab_dir

K8S_VERSION = os.environ.get("K8S_VERSION", "1.36.3")
API_PORT = 16443
ETCD_PORT = 23790
SERVICE_CIDR = "10.96.0.0/16"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

# Nodes of the lab cluster: named like the lab inventory's hosts. The GPU node
# carries what the GPU Operator's feature discovery and device plugin would add.
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


def bin_dir() -> Path:
    default = str(REPO_ROOT / ".cache" / "k8s" / K8S_VERSION)
    return Path(os.environ.get("GPUFLEET_K8S_DIR", default)) / "bin"


def crd_dir() -> Path:
    return bin_dir().parent / "crds"


def state_dir() -> Path:
    return Path(lab_dir(), "k8s")


def kubeconfig_path() -> Path:
    return state_dir() / "admin.kubeconfig"


# --- PKI -----------------------------------------------------------------------


def _write_pki(pki: Path) -> None:
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

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufleet-lab-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    save("ca.crt", ca.public_bytes(serialization.Encoding.PEM), 0o644)
    save("ca.key", key_pem(ca_key))

    def issue(name: str, cn: str, org: str | None = None, server: bool = False) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
        )
        if server:
            service_ip = ipaddress.IPv4Network(SERVICE_CIDR)[1]  # the kubernetes Service's address
            names: list[x509.GeneralName] = [
                x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
            ]
            names += [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.IPAddress(service_ip)]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        cert = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).sign(ca_key, hashes.SHA256())
        save(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        save(f"{name}.key", key_pem(key))

    issue("apiserver", "kube-apiserver", server=True)
    issue("admin", "gpufleet-admin", org="system:masters")
    issue("controller-manager", "system:kube-controller-manager")
    issue("scheduler", "system:kube-scheduler")
    issue("kwok", "system:kwok-controller", org="system:masters")
    sa_key = ec.generate_private_key(ec.SECP256R1())
    save("sa.key", key_pem(sa_key))
    save(
        "sa.pub",
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        0o644,
    )


def _kubeconfig(pki: Path, user: str) -> str:
    return f"""apiVersion: v1
kind: Config
clusters:
- name: gpufleet-lab
  cluster:
    server: https://127.0.0.1:{API_PORT}
    certificate-authority: {pki}/ca.crt
users:
- name: {user}
  user:
    client-certificate: {pki}/{user}.crt
    client-key: {pki}/{user}.key
contexts:
- name: gpufleet-lab
  context: {{cluster: gpufleet-lab, user: {user}}}
current-context: gpufleet-lab
"""


# --- processes -------------------------------------------------------------------


def _commands(state: Path) -> dict[str, list[str]]:
    pki, b = state / "pki", bin_dir()
    return {
        "etcd": [
            str(b / "etcd"),
            "--name=lab",
            f"--data-dir={state}/etcd",
            f"--listen-client-urls=http://127.0.0.1:{ETCD_PORT}",
            f"--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}",
            f"--listen-peer-urls=http://127.0.0.1:{ETCD_PORT + 10}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PORT + 10}",
            f"--initial-cluster=lab=http://127.0.0.1:{ETCD_PORT + 10}",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(b / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
            "--bind-address=127.0.0.1",
            f"--secure-port={API_PORT}",
            "--advertise-address=127.0.0.1",
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
            "--endpoint-reconciler-type=none",
        ],
        "kube-controller-manager": [
            str(b / "kube-controller-manager"),
            f"--kubeconfig={state}/controller-manager.kubeconfig",
            f"--authentication-kubeconfig={state}/controller-manager.kubeconfig",
            f"--authorization-kubeconfig={state}/controller-manager.kubeconfig",
            "--bind-address=127.0.0.1",
            "--secure-port=10257",
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
            "--secure-port=10259",
            "--leader-elect=false",
        ],
        "kwok": [
            str(b / "kwok"),
            f"--kubeconfig={state}/kwok.kubeconfig",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=10.213.7.254",
            "--server-address=127.0.0.1:10247",
        ],
    }


def _pid(name: str) -> int | None:
    pidfile = state_dir() / f"{name}.pid"
    try:
        pid = int(pidfile.read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _start(name: str, argv: list[str]) -> None:
    if _pid(name):
        return
    log = open(state_dir() / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (state_dir() / f"{name}.pid").write_text(str(proc.pid))


def _ssl_context(state: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(state / "pki" / "ca.crt"))
    ctx.load_cert_chain(str(state / "pki" / "admin.crt"), str(state / "pki" / "admin.key"))
    return ctx


def _wait_ready(state: Path, deadline: float) -> None:
    ctx = _ssl_context(state)
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{API_PORT}/readyz", context=ctx, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.3)
    raise LabError(f"kube-apiserver not ready ({last}); see {state}/kube-apiserver.log")


def up(timeout: float = 120) -> Path:
    """Start the control plane (building nothing: run scripts/build-lab-k8s.sh first)."""
    missing = [c for c in COMPONENTS if not (bin_dir() / c).exists()]
    if missing:
        raise LabError(f"missing {', '.join(missing)} in {bin_dir()}: run scripts/build-lab-k8s.sh")
    state = state_dir()
    state.mkdir(parents=True, exist_ok=True)
    pki = state / "pki"
    if not (pki / "ca.crt").exists():
        _write_pki(pki)
    for user in ("admin", "controller-manager", "scheduler", "kwok"):
        path = state / f"{user}.kubeconfig"
        path.write_text(_kubeconfig(pki, user))
        path.chmod(0o600)
    commands = _commands(state)
    if not _pid("etcd"):
        for port in (API_PORT, ETCD_PORT):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    raise LabError(
                        f"port {port} is taken by another control plane (another checkout's lab?):"
                        " stop it there with `gpufleet lab down`"
                    )
    deadline = time.monotonic() + timeout
    _start("etcd", commands["etcd"])
    _start("kube-apiserver", commands["kube-apiserver"])
    _wait_ready(state, deadline)
    for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
        _start(name, commands[name])
    _ensure_nodes_and_crds(deadline)
    return kubeconfig_path()


def _ensure_nodes_and_crds(deadline: float) -> None:
    from kubernetes import client, config, utils
    from kubernetes.client.exceptions import ApiException

    api_client = config.new_client_from_config(str(kubeconfig_path()))  # type: ignore[no-untyped-call]
    core: Any = client.CoreV1Api(api_client)
    for name, spec in NODES.items():
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
        try:
            core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
    # k3s creates the nvidia RuntimeClass when it finds the NVIDIA runtime; so does the lab.
    node_api: Any = client.NodeV1Api(api_client)
    try:
        node_api.create_runtime_class(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "nvidia"},
                "handler": "nvidia",
            }
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
    # A StorageClass, as every production cluster has one: the monitoring role checks that the class
    # of Prometheus's volume exists. No provisioner: kwok's pods need no volume.
    storage: Any = client.StorageV1Api(api_client)
    try:
        storage.create_storage_class(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": "lab-local"},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
    for crd in sorted(crd_dir().glob("*.yaml")):
        try:
            utils.create_from_yaml(api_client, str(crd))  # type: ignore[no-untyped-call]
        except utils.FailToCreateError as exc:
            if any(e.status != 409 for e in exc.api_exceptions):
                raise
    while time.monotonic() < deadline:
        ready = [
            n.metadata.name
            for n in core.list_node().items
            if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
        ]
        if set(NODES) <= set(ready):
            return
        time.sleep(0.3)
    raise LabError(f"kwok did not make nodes Ready; see {state_dir()}/kwok.log")


def down() -> list[str]:
    stopped = []
    for name in reversed(COMPONENTS):
        pid = _pid(name)
        if pid:
            os.killpg(pid, signal.SIGTERM)
            stopped.append(name)
    deadline = time.monotonic() + 15
    while any(_pid(n) for n in COMPONENTS) and time.monotonic() < deadline:
        time.sleep(0.1)
    for name in COMPONENTS:
        pid = _pid(name)
        if pid:
            os.killpg(pid, signal.SIGKILL)
    if state_dir().exists():
        subprocess.run(["rm", "-rf", str(state_dir())], check=True)
    return stopped


def status() -> dict[str, bool]:
    return {name: _pid(name) is not None for name in COMPONENTS}
