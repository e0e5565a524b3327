"""A faulty GPU taken out of service and brought back without a person, through the whole chain of real
parts: the FIXTURE exporter (the lab's dcgm-exporter stand-in) serves an injected XID for worker-gpu2's
GPU; Prometheus v3.7.2 (the lab's build) scrapes it and evaluates the monitoring role's GPU rules;
Alertmanager v0.28.1 (built from its Go module, the version kube-prometheus-stack 79.0.1 deploys) routes
the alert to ansible-rulebook 1.3.2 running the collection's rulebook, which runs
playbooks/gpu_remediation.yml against the lab's GPU cluster and, over SSH, the real node.

worker-gpu2 gets a FIXTURE nvidia-smi (a real H200's `nvidia-smi -q -x`) for the health gate, and a pod
that the drain must move. Each drill prints its timings (alert firing -> quarantine -> release).

The protection off: the same fault with no rulebook listening. The node keeps taking work, and the check
that it is quarantined within 30 s of the alert firing fails (`make drills`)."""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.platform.plugins.module_utils import dcgm
from conftest import wait_for
from gpufleet_lab import REPO_ROOT, lab_dir
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from kubernetes import client

NODE = next(n for n in labinventory.REAL_NODES if n.name == "worker-gpu2")
TAINT = "gpufleet.io/gpu-quarantine"
EXPORTER = REPO_ROOT / "lab/roles/lab_dcgm_fixture_exporter/files/dcgm_fixture_exporter.py"
RULES = REPO_ROOT / "roles/monitoring/files/rules/gpufleet-gpu.rules.yml"
ALERTMANAGER = "alertmanager-v0.28.1"
PROMETHEUS = "prometheus-v3.7.2"
# The goal: quarantined within 30 s of the alert firing; back in service within 5 minutes.
QUARANTINE_WITHIN = 30
RELEASE_WITHIN = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Chain:
    """The processes of the chain, each writing its log to the work directory."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports = {name: free_port() for name in ("exporter", "prometheus", "alertmanager", "rulebook")}
        self.token = secrets.token_urlsafe(24)
        self.faults = work / "faults.json"
        self.audit = work / "audit.jsonl"

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.work / f"{name}.log").open("w")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.work,
                                            start_new_session=True)  # fmt: skip
        wait_for(lambda: listening(self.ports[name]) or self.procs[name].poll() is not None, f"{name} to listen", 90)
        assert self.procs[name].poll() is None, f"{name} exited: {self.log(name)[-2000:]}"

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

    def log(self, name: str) -> str:
        return (self.work / f"{name}.log").read_text(errors="replace")

    def inject(self, xid: int) -> None:
        self.faults.write_text(json.dumps({"0": {"DCGM_FI_DEV_XID_ERRORS": xid}} if xid else {}))

    def audit_rows(self) -> list[dict]:
        return [json.loads(line) for line in self.audit.read_text().splitlines()] if self.audit.exists() else []

    def firing_since(self, xid: int) -> float | None:
        """When Prometheus's GPUXidError for that XID became active (seconds since the epoch)."""
        url = f"http://127.0.0.1:{self.ports['prometheus']}/api/v1/alerts"
        with urllib.request.urlopen(url, timeout=5) as answer:
            alerts = json.load(answer)["data"]["alerts"]
        for alert in alerts:
            if alert["labels"].get("alertname") == "GPUXidError" and alert["labels"].get("xid") == str(xid) \
                    and alert["state"] == "firing":  # fmt: skip
                return _epoch(alert["activeAt"])
        return None


def _epoch(stamp: str) -> float:
    """Prometheus's RFC 3339 time (nanoseconds, Z) as seconds since the epoch."""
    from datetime import datetime

    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp() + float(f"0.{fraction or 0}")


def start_monitoring(chain: Chain) -> None:
    """The FIXTURE exporter, Prometheus with the collection's GPU rules, and Alertmanager routing to the rulebook."""
    bin_dir = labk8s.bin_dir()
    assert (bin_dir / ALERTMANAGER).exists(), f"{ALERTMANAGER} is not built: run `make lab-controllers`"
    counters = chain.work / "counters.csv"
    counters.write_text(dcgm.counters_csv())
    chain.inject(0)
    listen = f"127.0.0.1:{chain.ports['exporter']}"
    chain.start("exporter", [sys.executable, str(EXPORTER), "--counters", str(counters), "--node-name", NODE.name,
                             "--listen", listen, "--faults", str(chain.faults)])  # fmt: skip
    token_file = chain.work / "token"
    token_file.write_text(chain.token)
    token_file.chmod(0o600)
    (chain.work / "alertmanager.yml").write_text(yaml.safe_dump({
        "route": {"receiver": "gpu-remediation", "group_by": ["alertname", "Hostname"], "group_wait": "0s",
                  "group_interval": "1s", "repeat_interval": "1m"},
        "receivers": [{"name": "gpu-remediation", "webhook_configs": [{
            "url": f"http://127.0.0.1:{chain.ports['rulebook']}/endpoint", "send_resolved": False,
            "http_config": {"authorization": {"credentials_file": str(token_file)}}}]}],
    }))  # fmt: skip
    chain.start("alertmanager", [str(bin_dir / ALERTMANAGER), "--config.file=alertmanager.yml",
                                 "--storage.path=am-data", "--cluster.listen-address=",
                                 f"--web.listen-address=127.0.0.1:{chain.ports['alertmanager']}"])  # fmt: skip
    alertmanager = chain.ports["alertmanager"]
    (chain.work / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager}"]}]}]},
        "scrape_configs": [{"job_name": "gpufleet-dcgm",
                            "static_configs": [{"targets": [f"127.0.0.1:{chain.ports['exporter']}"]}]}],
    }))  # fmt: skip
    chain.start("prometheus", [str(bin_dir / PROMETHEUS), "--config.file=prometheus.yml", "--storage.tsdb.path=tsdb",
                               f"--web.listen-address=127.0.0.1:{chain.ports['prometheus']}"])  # fmt: skip


def start_rulebook(chain: Chain) -> None:
    """ansible-rulebook with the collection's rulebook, the GPU node in its inventory."""
    lab = lab_dir()
    inventory = {"all": {
        "hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
        "children": {"gpu_nodes": {"hosts": {NODE.name: {"ansible_host": NODE.address}}}},
        "vars": {
            "ansible_user": "root", "ansible_ssh_private_key_file": str(lab / "ssh/id_ed25519"),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={lab / 'ssh/known_hosts'} -o StrictHostKeyChecking=yes",
            "gpufleet_gpu_cluster_kubeconfig": str(labk8s.kubeconfig_path("gpu")),
            "gpu_remediation_audit_log": str(chain.audit), "gpu_remediation_breaker": 1,
            "gpu_remediation_reboot": False, "gpu_remediation_drain_timeout": "60s",
        },
    }}  # fmt: skip
    (chain.work / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO_ROOT / "collections"),
           "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "GPUFLEET_REMEDIATION_TOKEN": chain.token, "GPUFLEET_REMEDIATION_PORT": str(chain.ports["rulebook"]),
           "GPUFLEET_REMEDIATION_HOST": "127.0.0.1"}  # fmt: skip
    # The project's virtualenv's (requirements/dev.txt), beside this Python.
    rulebook = Path(sys.executable).parent / "ansible-rulebook"
    chain.start("rulebook", [str(rulebook), "--rulebook", "gpufleet.platform.gpu_remediation", "-i", "inventory.yml",
                             "--env-vars", ",".join(name for name in env if name.startswith("GPUFLEET_REMEDIATION_")),
                             "-v"], env)  # fmt: skip


NVIDIA_SMI = REPO_ROOT / "tests/fixtures/nvidia-smi-fixture.sh"


@pytest.fixture(scope="module")
def gpu_node(gpu_api) -> Iterator[None]:
    """worker-gpu2 with a FIXTURE nvidia-smi, and a pod that a drain must move."""
    xml = base64.b64encode((REPO_ROOT / "tests/fixtures/nvidia-smi-q-x.h200.xml").read_bytes()).decode()
    script = base64.b64encode(NVIDIA_SMI.read_bytes()).decode()
    labnodes.in_node(NODE, "mkdir -p /usr/share/gpufleet-fixture && "
                           f"echo {xml} | base64 -d > /usr/share/gpufleet-fixture/nvidia-smi-q-x.xml && "
                           f"echo {script} | base64 -d > /usr/local/bin/nvidia-smi && "
                           "chmod 755 /usr/local/bin/nvidia-smi")  # fmt: skip
    yield
    labnodes.in_node(NODE, "rm -rf /usr/local/bin/nvidia-smi /usr/share/gpufleet-fixture", check=False)
    core = client.CoreV1Api(gpu_api)
    node = core.read_node(NODE.name)
    taints = [t for t in node.spec.taints or [] if t.key != TAINT]
    core.patch_node(NODE.name, {"spec": {"unschedulable": None, "taints": taints},
                                "metadata": {"labels": {"gpufleet.io/replace": None}}})  # fmt: skip
    core.delete_collection_namespaced_event("default", field_selector="source=gpufleet-remediation")


@pytest.fixture
def workload(gpu_api, namespace) -> str:
    apps = client.AppsV1Api(gpu_api)
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "inference"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "inference"}}, "template": {
            "metadata": {"labels": {"app": "inference"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE.name}, "terminationGracePeriodSeconds": 2,
                     "tolerations": [{"key": "gpufleet.io/lab-kubelet", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "server", "image": "registry.k8s.io/pause:3.10"}]}}},
    })  # fmt: skip
    core = client.CoreV1Api(gpu_api)

    def running():
        pods = core.list_namespaced_pod(namespace).items
        return [p.metadata.uid for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]

    wait_for(running, "the workload's pod on worker-gpu2", 120)
    return namespace


def pod_uids(gpu_api, namespace: str) -> set[str]:
    return {p.metadata.uid for p in client.CoreV1Api(gpu_api).list_namespaced_pod(namespace).items}


def remediation_events(gpu_api) -> set[str]:
    selector = f"involvedObject.name={NODE.name},source=gpufleet-remediation"
    return {e.reason for e in client.CoreV1Api(gpu_api).list_namespaced_event("default", field_selector=selector).items}


def quarantined(gpu_api) -> bool:
    node = client.CoreV1Api(gpu_api).read_node(NODE.name)
    return any(t.key == TAINT for t in node.spec.taints or [])


@pytest.fixture
def chain(tmp_path) -> Iterator[Chain]:
    chain = Chain(tmp_path)
    try:
        start_monitoring(chain)
        yield chain
    finally:
        for name in list(chain.procs):
            chain.stop(name)


def test_the_webhook_refuses_a_caller_without_the_token(chain, gpu_node):
    start_rulebook(chain)
    request = urllib.request.Request(f"http://127.0.0.1:{chain.ports['rulebook']}/endpoint",
                                     data=b'{"status": "firing", "alerts": []}', method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401


def test_an_application_xid_evicts_nothing(chain, gpu_node, workload, gpu_api):
    start_rulebook(chain)
    before = pod_uids(gpu_api, workload)
    chain.inject(13)
    row = wait_for(lambda: [r for r in chain.audit_rows() if r["outcome"] == "nothing_to_do"], "the decision", 120)
    print(f"\nXID 13 on {NODE.name}: {row[0]['outcome']}, {row[0]['why']}")
    assert row[0]["node"] == NODE.name and row[0]["cause"] == "XID 13 (graphics engine exception)"
    assert pod_uids(gpu_api, workload) == before
    assert not quarantined(gpu_api) and not client.CoreV1Api(gpu_api).read_node(NODE.name).spec.unschedulable


def test_a_double_bit_ecc_error_quarantines_the_node_and_a_reset_brings_it_back(chain, gpu_node, workload, gpu_api):
    start_rulebook(chain)
    before = pod_uids(gpu_api, workload)
    chain.inject(48)
    fired = wait_for(lambda: chain.firing_since(48), "GPUXidError for XID 48 to fire", 60)
    wait_for(lambda: quarantined(gpu_api), "the quarantine", QUARANTINE_WITHIN + 60)
    quarantine_s = time.time() - fired
    chain.inject(0)  # the reset cleared it: the exporter reports no XID from here on
    rows = wait_for(lambda: [r for r in chain.audit_rows() if r["outcome"] in ("released", "replace")],
                    "the release", RELEASE_WITHIN + 60)  # fmt: skip
    released_s = time.time() - fired
    steps = [(r["step"], r["healthy"]) for r in chain.audit_rows() if r["outcome"] == "step"]
    print(f"\nXID 48 on {NODE.name}: alert firing -> quarantined {quarantine_s:.1f} s, -> back in service "
          f"{released_s:.1f} s; ladder {steps}")  # fmt: skip
    assert rows[0]["outcome"] == "released", chain.log("rulebook")[-3000:]
    assert quarantine_s <= QUARANTINE_WITHIN and released_s <= RELEASE_WITHIN
    node = client.CoreV1Api(gpu_api).read_node(NODE.name)
    assert not node.spec.unschedulable and not quarantined(gpu_api)
    # The drain moved the pod: the one running now is a replacement.
    wait_for(lambda: pod_uids(gpu_api, workload) - before, "the replacement pod", 60)
    # The audit row comes first, the node's Event right after it.
    wait_for(lambda: {"GPURemediationQuarantined", "GPURemediationReleased"} <= remediation_events(gpu_api),
             "the node's Events", 30)  # fmt: skip


@pytest.mark.protection_off
def test_without_the_rulebook_the_faulty_node_keeps_taking_work(chain, gpu_node, workload, gpu_api):
    chain.inject(48)
    fired = wait_for(lambda: chain.firing_since(48), "GPUXidError for XID 48 to fire", 60)
    with pytest.raises(AssertionError, match="timed out"):
        wait_for(lambda: quarantined(gpu_api), "the quarantine", QUARANTINE_WITHIN)
    print(f"\nno rulebook: XID 48 firing for {time.time() - fired:.0f} s, {NODE.name} still schedulable and untainted")
    assert not client.CoreV1Api(gpu_api).read_node(NODE.name).spec.unschedulable
