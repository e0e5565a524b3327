"""The real Prometheus Operator in the lab's main cluster, fed by a DCGM exporter pod on the GPU
cluster's real node through the telemetry tunnel, as in production. The monitoring role installs
kube-prometheus-stack 79.0.1, as released, onto the main cluster's real node: its operator (v0.86.1,
built from its Go module) reconciles a Prometheus (v3.7.2, built from its module too), the collection's
alert rules and the telemetry tunnel's ServiceMonitor into a running configuration, and that
Prometheus scrapes what the chart's ServiceMonitors select. The dcgm_exporter role's DaemonSet runs the
lab's dcgm-exporter image (the FIXTURE exporter: no GPU here) on the GPU cluster's node; the
telemetry_tunnel role carries its host port to the main cluster's node. Beside the tunnel, the
telemetry_agent role's agent for the GPU cluster (Prometheus in agent mode, a pod) sends the same
exporter's samples to that Prometheus's remote-write receiver: both telemetry modes, side by side."""

import contextlib
import json
import secrets
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv
from conftest import wait_for
from gpufleet_lab import LAB_INVENTORY, REPO_ROOT, lab_dir
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from kubernetes import client
from kubernetes.client.exceptions import ApiException

PLAYBOOK = Path(__file__).parent / "playbooks" / "prometheus_operator.yml"
NODE_PORT = 30190  # beside the lab's own release
NODE_EXPORTER_PORT = 9108
TUNNEL_BASE_PORT = 19500  # the node's tunnel is on base + its slot; the lab's own from 19401
(MAIN_NODE,) = labnodes.nodes_of("main")
# Not the lab inventory's GPU node (worker-gpu1), where the main job's exporter holds the host port.
# The tunnel host is the main job's too: this run takes its tunnels over (a converge gives them back).
GPU_NODE = labnodes.nodes_of("gpu")[1]


def release(namespace: str) -> str:
    """Unique within the chart's 26-character prefix of cluster-wide names (its ClusterRoles)."""
    return "op-" + namespace.rsplit("-", 1)[1]


SLOTS_FILE = "/etc/gpufleet/telemetry-tunnel-slots.json"  # the telemetry_tunnel role's record on its host


def tunnel_slot() -> int:
    """The GPU node's slot on the tunnel host: kept from the main job's runs, so not always 1."""
    return json.loads(labnodes.in_node(MAIN_NODE, f"cat {SLOTS_FILE}").stdout)[GPU_NODE.name]


@pytest.fixture
def main_jobs_slots():
    """The tunnel host's slot record is given back as the main job left it (or removed, on a lab it
    has not converged yet): else its next converge finds this run's node holding slot 1 and gives
    the lab's GPU node another port than the one the lab's tests expect. This run's unit is stopped
    by that converge, as a departed node's."""
    before = labnodes.in_node(MAIN_NODE, f"cat {SLOTS_FILE}", check=False)
    yield
    if before.returncode == 0:
        labnodes.in_node(MAIN_NODE, f"cat > {SLOTS_FILE} <<'EOF'\n{before.stdout.rstrip()}\nEOF")
    else:
        labnodes.in_node(MAIN_NODE, f"rm -f {SLOTS_FILE}")


def converge(namespace: str, workdir: Path, agent_password: str) -> dict:
    # The real nodes join the lab inventory for this run: the tunnel's ends are hosts Ansible logs in to.
    nodes = workdir / "real-nodes.yml"
    nodes.write_text(json.dumps({"all": {"children": {
        "telemetry_tunnel_hosts": {"hosts": {MAIN_NODE.name: {"ansible_host": MAIN_NODE.address}}},
        "operator_test_tunnel_host": {"hosts": {MAIN_NODE.name: {}}},
        "operator_test_gpu_node": {"hosts": {GPU_NODE.name: {"ansible_host": GPU_NODE.address}}},
    }}}))  # fmt: skip
    extra = {"test_namespace": namespace, "test_release": release(namespace),
             "test_prometheus_node_port": NODE_PORT, "test_node_exporter_port": NODE_EXPORTER_PORT,
             "test_tunnel_host": MAIN_NODE.name, "test_gpu_node": GPU_NODE.name,
             "test_tunnel_base_port": TUNNEL_BASE_PORT, "test_dcgm_exporter_image": labnodes.DCGM_FIXTURE_IMAGE,
             "test_tolerations": [{"key": labnodes.TAINT["key"], "operator": "Exists"}],
             "test_receiver": f"{MAIN_NODE.address}:{NODE_PORT}", "test_agent_password": agent_password}  # fmt: skip
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(LAB_INVENTORY.parent), "-i", str(nodes),
           str(PLAYBOOK), "-e", json.dumps(extra)]  # fmt: skip
    env = {"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin",
           "GPUFLEET_LAB_DIR": str(lab_dir())}  # the nodes' inventory is not beside the lab's  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    stats = json.loads(proc.stdout)["stats"]
    return {key: sum(host[key] for host in stats.values()) for key in ("changed", "failures", "unreachable")}


def query(path: str) -> Any:
    """Prometheus's HTTP API, through its NodePort on the main cluster's real node."""
    try:
        with urllib.request.urlopen(f"http://{MAIN_NODE.address}:{NODE_PORT}{path}", timeout=5) as response:
            return json.loads(response.read())["data"]
    except OSError:
        return None


def ready_pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.status.container_statuses and all(c.ready for c in p.status.container_statuses)]


def test_gpu_metrics_reach_the_operators_prometheus_through_the_tunnel(
    api, gpu_api, namespace, tmp_path, published_images, main_jobs_slots
):
    core, gpu_core = client.CoreV1Api(api), client.CoreV1Api(gpu_api)
    try:
        password = secrets.token_urlsafe(24)  # made for the run; the receiver here checks none
        converge(namespace, tmp_path, password)
        [operator] = ready_pods(core, namespace, "app=kube-prometheus-stack-operator")  # helm waited for it
        assert operator.spec.node_name == MAIN_NODE.name
        [pod] = wait_for(
            lambda: ready_pods(core, namespace, "app.kubernetes.io/name=prometheus"),
            "the Prometheus the operator made to be ready",
            timeout=180,
        )
        assert pod.spec.node_name == MAIN_NODE.name
        assert {c.name: c.image for c in pod.spec.containers} == {
            "prometheus": "quay.io/prometheus/prometheus:v3.7.2",
            "config-reloader": "quay.io/prometheus-operator/prometheus-config-reloader:v0.86.1",
        }
        assert wait_for(lambda: query("/api/v1/status/buildinfo"), "Prometheus's API")["version"] == "3.7.2"
        # The exporter pod runs on the GPU cluster's real node and passed its readiness probe (the role waited).
        [exporter] = ready_pods(gpu_core, namespace, "app.kubernetes.io/name=dcgm-exporter")
        assert exporter.spec.node_name == GPU_NODE.name
        assert exporter.spec.containers[0].image == labnodes.DCGM_FIXTURE_IMAGE

        def targets() -> dict[str, dict[str, dict]]:
            """Targets by scrape pool (one per ServiceMonitor endpoint, without the release's prefix)
            and scrape URL."""
            found: dict[str, dict[str, dict]] = {}
            for target in (query("/api/v1/targets") or {}).get("activeTargets", []):
                _, _, monitor, endpoint = target["scrapePool"].split("/")
                pool = f"{monitor.removeprefix(release(namespace) + '-')}/{endpoint}"
                found.setdefault(pool, {})[target["scrapeUrl"]] = target
            return found

        # What runs for real is scraped: Prometheus and the operator (pods on the real node), the
        # node-exporter and the kubelet there (the kubelet over TLS with Prometheus's token), the
        # API server, and the GPU node's exporter through the tunnel on the main cluster's node.
        # kwok's simulated node m1 has no address to scrape.
        wanted = {
            "kube-prometheus-prometheus/0": None,
            "kube-prometheus-operator/0": None,
            "prometheus-node-exporter/0": f"http://{MAIN_NODE.address}:{NODE_EXPORTER_PORT}/metrics",
            "kube-prometheus-kubelet/0": f"https://{MAIN_NODE.address}:10250/metrics",
            "kube-prometheus-kubelet/1": f"https://{MAIN_NODE.address}:10250/metrics/cadvisor",
            "kube-prometheus-apiserver/0": None,
            f"dcgm-{GPU_NODE.name}/0": f"http://{MAIN_NODE.address}:{TUNNEL_BASE_PORT + tunnel_slot()}/metrics",
        }

        def scraped() -> dict[str, dict[str, dict]] | None:
            found = targets()
            for pool, url in wanted.items():
                healths = {scrape_url: target["health"] for scrape_url, target in found.get(pool, {}).items()}
                if not healths or (url is None and "up" not in healths.values()) or (url and healths.get(url) != "up"):
                    return None
            return found

        try:
            found = wait_for(scraped, f"targets {sorted(wanted)} up", timeout=180)
        except AssertionError as timeout:
            health = {pool: {url: (t["health"], t["lastError"]) for url, t in by_url.items()}
                      for pool, by_url in targets().items()}  # fmt: skip
            raise AssertionError(f"{timeout}; Prometheus has {health}") from None
        [tunnel] = found[f"dcgm-{GPU_NODE.name}/0"].values()
        assert tunnel["labels"]["instance"] == GPU_NODE.name
        # The DCGM series as production's dashboards and alerts read them: the node's name on both labels.
        series = wait_for(
            lambda: (query(f'/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace}"}}') or {}).get("result"),
            "DCGM_FI_DEV_GPU_UTIL in Prometheus",
        )
        assert {(s["metric"]["instance"], s["metric"]["Hostname"]) for s in series} == {(GPU_NODE.name, GPU_NODE.name)}

        # The remote-write mode: the cluster's agent pod runs on the exporter's node, and its samples carry
        # the tunnel path's labels, so verify reads them alike (targets from the agents' `up` series).
        [agent] = ready_pods(gpu_core, namespace, "app.kubernetes.io/name=gpufleet-telemetry-agent")  # the role waited
        # Its reading rights reach vLLM's namespace, made by the role though vLLM's play comes later.
        rights = client.RbacAuthorizationV1Api(gpu_api).read_namespaced_role(
            "gpufleet-telemetry-agent", f"{namespace}-vllm"
        )
        assert [(r.resources, r.verbs) for r in rights.rules] == [(["pods"], ["get", "list", "watch"])]
        assert agent.spec.node_name == GPU_NODE.name
        assert {c.image for c in agent.spec.containers} == {
            "quay.io/prometheus/prometheus:v3.7.2",
            "quay.io/prometheus-operator/prometheus-config-reloader:v0.86.1",
        }
        written = wait_for(
            lambda: (query('/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL{gpufleet_transport="remote_write"}') or {}).get(
                "result"
            ),
            "remote-written DCGM_FI_DEV_GPU_UTIL in Prometheus",
        )
        assert {(s["metric"]["job"], s["metric"]["instance"], s["metric"]["Hostname"]) for s in written} == {
            ("gpufleet-dcgm", GPU_NODE.name, GPU_NODE.name)
        }
        # The agent's own `up` series for the exporter it scrapes (what verify reads in this mode).
        agent_up = query('/api/v1/query?query=up{job="gpufleet-dcgm",gpufleet_transport="remote_write"}')["result"]
        assert [(s["metric"]["instance"], s["value"][1]) for s in agent_up] == [(GPU_NODE.name, "1")], agent_up
        report = pv.verify(f"http://{MAIN_NODE.address}:{NODE_PORT}", "gpufleet-dcgm", pv.dcgm_profile(),
                           [GPU_NODE.name], timeout_s=60, targets_from="up")  # fmt: skip
        assert report.ok, report.failures

        groups = {group["name"] for group in query("/api/v1/rules")["groups"]}
        assert {"gpufleet-gpu", "gpufleet-vllm", "gpufleet-triton"} <= groups, groups
        assert converge(namespace, tmp_path, password) == {"changed": 0, "failures": 0, "unreachable": 0}  # a re-run
    finally:
        with contextlib.suppress(ApiException):
            gpu_core.delete_namespace(f"{namespace}-vllm")
        subprocess.run(
            [str(labk8s.bin_dir() / "helm"), "--kubeconfig", str(labk8s.kubeconfig_path("main")), "uninstall",
             release(namespace), "-n", namespace, "--wait"],
            capture_output=True, check=False,
        )  # fmt: skip
        # The operator's kubelet Service (in kube-system) is the operator's, not the release's: helm leaves
        # it. Its name is cut as the chart cuts it, so find it by the release's prefix.
        for service in core.list_namespaced_service("kube-system").items:
            if service.metadata.name.startswith(release(namespace) + "-"):
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_service(service.metadata.name, "kube-system")
