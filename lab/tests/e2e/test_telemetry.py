"""GPU metrics travel as in production: the dcgm_exporter role's pod on the GPU node (worker-gpu1)
-> its host port -> SSH tunnel -> the main cluster's node (worker-main) -> kube-prometheus-stack's
Prometheus (through the ServiceMonitor the tunnel role publishes in the main cluster), and the path heals."""

import base64
import gzip
import time

import gpufleet_lab as lab
import pytest
import yaml
from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv
from conftest import (
    GPU_NODE,
    GPU_NODE_ADDRESS,
    PROMETHEUS,
    TUNNEL_HOST,
    TUNNEL_HOST_ADDRESS,
    in_host,
    link_outage,
    power_off,
    power_on,
    wait_for_tunnel,
)

from gpufleet import runner

SCRAPE_POOL = f"serviceMonitor/gpu-telemetry/dcgm-{GPU_NODE}/0"


def test_dcgm_metrics_arrive_with_node_labels(converged):
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), [GPU_NODE], timeout_s=60)
    assert report.ok, report.failures
    assert [t.instance for t in report.targets] == [GPU_NODE] and report.targets[0].health == "up"
    # Scraped through the job the ServiceMonitor generates, with the operator's target labels.
    assert report.targets[0].scrape_url.startswith(f"http://{TUNNEL_HOST_ADDRESS}:19401/")
    status = {m.metric: m.status for m in report.metrics}
    assert status["DCGM_FI_DEV_GPU_UTIL"] == "ok"


def verdict_once_the_gpu_node_is_down(within_s: float = 20) -> pv.Report:
    """The verifier's verdict once Prometheus has seen the GPU node's target fail.

    Until the next scrape fails, Prometheus still reports the target up with a fresh
    sample, so a single verdict right after the fault may rightly pass.
    """
    deadline = time.monotonic() + within_s
    while True:
        report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), [GPU_NODE], max_age_s=15, timeout_s=0)
        if any(f"target {GPU_NODE}" in f for f in report.failures) or time.monotonic() > deadline:
            return report
        time.sleep(1)


def test_verifier_names_the_cause_when_the_target_is_down(converged):
    in_host(TUNNEL_HOST, f"systemctl stop gpufleet-tunnel@{GPU_NODE}")
    try:
        report = verdict_once_the_gpu_node_is_down()
        assert any(f"target {GPU_NODE}" in f and "down" in f for f in report.failures), report.failures
    finally:
        in_host(TUNNEL_HOST, f"systemctl start gpufleet-tunnel@{GPU_NODE}")
        wait_for_tunnel()


def test_tunnel_recovers_after_ssh_is_killed(converged):
    wait_for_tunnel()
    killed = time.monotonic()
    in_host(TUNNEL_HOST, "pkill -KILL -u gpufleet-tunnel -x ssh")
    wait_for_tunnel(timeout=15)
    print(f"tunnel recovery after kill: {time.monotonic() - killed:.2f}s")


def test_tunnel_recovers_within_15_s_after_a_silent_link_outage(converged):
    # Longer than the keepalives take to give up (3 x 5 s), so ssh exits and retries meanwhile.
    wait_for_tunnel()
    with link_outage():
        time.sleep(45)
    healed = time.monotonic()
    wait_for_tunnel(timeout=15)
    print(f"tunnel recovery after a 45 s silent outage: {time.monotonic() - healed:.2f}s")


def test_tunnel_recovers_after_gpu_node_sshd_restart(converged):
    in_host(GPU_NODE, "systemctl restart ssh")
    in_host(TUNNEL_HOST, "pkill -KILL -u gpufleet-tunnel -x ssh")  # existing sessions survive an sshd restart
    wait_for_tunnel(timeout=15)


def test_tunnel_key_gets_no_shell(tunnel_ssh):
    result = in_host(TUNNEL_HOST, tunnel_ssh + " id", check=False)
    assert "uid=" not in result.stdout


def test_tunnel_key_gets_no_pty_and_no_agent(tunnel_ssh):
    result = in_host(TUNNEL_HOST, tunnel_ssh + " -tt -A true", check=False)
    assert result.returncode != 0 or "PTY allocation request failed" in result.stderr


def test_tunnel_key_cannot_forward_elsewhere(tunnel_ssh):
    # Forward a local port to the GPU node's sshd: the listener opens on the tunnel host, but the node
    # refuses the channel (permitopen), so no SSH banner ever comes back.
    probe = (
        f"({tunnel_ssh} -N -L 127.0.0.1:29022:127.0.0.1:22 2>/tmp/fwd.err & pid=$!; sleep 2;"
        " python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', 29022), 3); s.settimeout(3);"
        ' print(repr(s.recv(64)))"; kill $pid; cat /tmp/fwd.err)'
    )
    result = in_host(TUNNEL_HOST, probe, check=False)
    assert "SSH-2.0" not in result.stdout
    assert "administratively prohibited" in result.stdout + result.stderr


def test_other_key_is_refused(converged):
    in_host(TUNNEL_HOST, "rm -f /tmp/other && ssh-keygen -q -t ed25519 -N '' -f /tmp/other")
    result = in_host(
        TUNNEL_HOST,
        "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -i /tmp/other"
        f" -N -L 127.0.0.1:29023:127.0.0.1:9400 -o ExitOnForwardFailure=yes gpufleet-tunnel@{GPU_NODE_ADDRESS}",
        check=False,
    )
    assert result.returncode != 0 and "Permission denied" in result.stderr


def test_benchmark_gpu_correlation_reads_the_dcgm_series(converged):
    from ansible_collections.gpufleet.platform.plugins.module_utils import bench_telemetry
    from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb

    # The window must hold 20 s of samples; earlier drills cut the tunnel, so wait for them.
    energy = f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{instance="{GPU_NODE}"}}'
    # Both edges count: a scrape that fails leaves a staleness marker, so "now" can be empty too.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (
        pv.query(PROMETHEUS, energy, time.time() - 21) and pv.query(PROMETHEUS, energy, time.time())
    ):
        time.sleep(1)
    now = time.time()
    level = lb.judge_level(lb.BenchConfig(base_url="x"), 1, [], [], 0.0, now - 20, now)
    level.output_tokens_per_s = 100.0
    bench_telemetry.gpu_sampler(PROMETHEUS, f'instance="{GPU_NODE}"', exporter_interval_s=30)(level)
    # The lab's exporter is the FIXTURE stand-in, and its figures say so.
    assert level.gpu["source"].startswith("prometheus (DCGM STAND-IN") and level.gpu["stand_in"] == "dcgm-fixture"
    assert 0 <= level.gpu["util_mean_pct"] <= 100
    assert level.gpu["fb_used_mean_mib"] > 0
    # The fixture's energy counter grows 300 J/s; scrapes every 5 s make the delta coarse.
    assert 3000 <= level.gpu["energy_j"] <= 9000
    assert level.gpu["tokens_per_joule"] == pytest.approx(2000 / level.gpu["energy_j"])
    assert any("shorter than the exporter interval" in w for w in level.warnings)


def scrape_pools() -> set[str]:
    import json
    import urllib.request

    with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/targets", timeout=5) as response:
        return {t["scrapePool"] for t in json.loads(response.read())["data"]["activeTargets"]}


def generated_scrape_jobs(core) -> set[str]:
    """The scrape jobs of the configuration the operator generated for the lab's Prometheus (its Secret)."""
    secret = core.read_namespaced_secret("prometheus-monitoring-kube-prometheus-prometheus", "monitoring")
    generated = yaml.safe_load(gzip.decompress(base64.b64decode(secret.data["prometheus.yaml.gz"])))
    return {job["job_name"] for job in generated["scrape_configs"]}


def test_a_service_monitor_prometheus_does_not_select_is_left_out_of_its_configuration(converged):
    """The classic silent failure: the ServiceMonitor lacks the release label Prometheus selects on, so
    the operator leaves its job out of the configuration it generates; a converge puts the label back.
    The operator's output is read, which changes within seconds: Prometheus itself drops the target
    when its config-reloader next reloads, on the reloader's poll in the lab (measured: 106 to 182 s)."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(str(lab.lab_dir() / "k8s" / "main" / "admin.kubeconfig"))
    api, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    args = ("monitoring.coreos.com", "v1", "gpu-telemetry", "servicemonitors", f"dcgm-{GPU_NODE}")
    assert SCRAPE_POOL in scrape_pools() and SCRAPE_POOL in generated_scrape_jobs(core)
    api.patch_namespaced_custom_object(*args, {"metadata": {"labels": {"release": "kube-prometheus-stack"}}})
    try:
        deadline = time.monotonic() + 60
        while SCRAPE_POOL in generated_scrape_jobs(core) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert SCRAPE_POOL not in generated_scrape_jobs(core)
    finally:
        # The next converge puts the label back (the role owns it): the telemetry plays of site.yml are enough.
        assert runner.run_playbook("playbooks/telemetry.yml", lab.LAB_INVENTORY.parent, quiet=True).ok
    deadline = time.monotonic() + 60
    while SCRAPE_POOL not in generated_scrape_jobs(core) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert SCRAPE_POOL in generated_scrape_jobs(core)
    # And the target is up, whether or not the reloader loaded the configuration without it meanwhile.
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), [GPU_NODE], timeout_s=240)
    assert report.ok, report.failures


def test_gpu_node_stop_and_start(converged):
    """The GPU node goes away entirely (its pods and services stop, as at a power cut) and comes back:
    the kubelet restarts the exporter's pod and the tunnel heals by itself."""
    power_off(GPU_NODE)
    try:
        report = verdict_once_the_gpu_node_is_down()
        assert any("down" in f for f in report.failures), report.failures
    finally:
        power_on(GPU_NODE)
    started = time.monotonic()
    wait_for_tunnel(timeout=90)
    print(f"tunnel back {time.monotonic() - started:.1f}s after {GPU_NODE} started")
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), [GPU_NODE], max_age_s=15, timeout_s=60)
    assert report.ok, report.failures
