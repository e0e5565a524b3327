"""The gpufleet CLI driving real ansible-runner runs on the lab: exit codes, failure
table, JSON against its schema, cancellation, and the live display in a real terminal."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import gpufleet_lab as lab
import jsonschema
import pytest
import yaml
from conftest import GPU_NODE, GPUFLEET, PROMETHEUS, TUNNEL_HOST, gpufleet, in_host

from gpufleet import runner

SCHEMA = json.loads(runner.SUMMARY_SCHEMA.read_text())
LAB = str(lab.LAB_INVENTORY.parent)  # named: gpufleet never takes the lab's inventory unasked


def variant_inventory(tmp_path: Path, hosts: dict[str, dict[str, object]]) -> Path:
    """The lab's inventory plus extra or changed GPU-node host entries."""
    target = tmp_path / "inventory"
    shutil.copytree(lab.LAB_INVENTORY.parent, target)
    inventory = yaml.safe_load((target / "hosts.yml").read_text())
    for name, host_vars in hosts.items():
        entry = inventory["all"]["children"]["gpu_nodes"]["hosts"].setdefault(name, {}) or {}
        inventory["all"]["children"]["gpu_nodes"]["hosts"][name] = {**entry, **host_vars}
    (target / "hosts.yml").write_text(yaml.safe_dump(inventory))
    common = yaml.safe_load((target / "group_vars" / "all.yml").read_text())
    common["gpufleet_lab_dir"] = str(lab.lab_dir())  # the default is relative to lab/inventory
    (target / "group_vars" / "all.yml").write_text(yaml.safe_dump(common))
    return target


def tunnel_targets_become(nodes: list[str], timeout: float = 180) -> list[str]:
    """The GPU nodes whose DCGM tunnel targets the main cluster's Prometheus scrapes, once they are
    the ones expected (the operator regenerates its configuration and the reloader reloads it).
    vLLM's tunnel target (on the lab's GPU node only) is another scrape pool."""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/targets", timeout=5) as response:
            targets = json.loads(response.read())["data"]["activeTargets"]
        found = sorted(
            t["labels"]["instance"] for t in targets if t["scrapePool"].startswith("serviceMonitor/gpu-telemetry/dcgm-")
        )
        if found == nodes or time.monotonic() > deadline:
            return found
        time.sleep(1)


def slots() -> dict[str, int]:
    """The slots the tunnel host gave the GPU nodes (their ports and WireGuard addresses)."""
    return json.loads(in_host(TUNNEL_HOST, "cat /etc/gpufleet/telemetry-tunnel-slots.json").stdout)


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    document = json.loads(proc.stdout)
    jsonschema.validate(document, SCHEMA)
    return document


def test_up_succeeds_and_its_json_matches_the_schema(converged):
    document = summary_of(converged)  # the session's first converge: `gpufleet --json up`
    assert document["ok"] and document["failures"] == []
    assert set(document["hosts"]) == {TUNNEL_HOST, GPU_NODE, "localhost"}
    # The run directory keeps the same document next to ansible-runner's artifacts.
    run_dir = Path(str(document["run_dir"]))
    assert json.loads((run_dir / runner.SUMMARY_FILE).read_text()) == document
    assert any((run_dir / "job_events").iterdir())


def test_a_failing_and_an_unreachable_host_are_named_the_others_complete_and_a_rerun_cleans_up(
    second_gpu_node, tmp_path
):
    # One run, both kinds of trouble (each run of the lab costs CI a minute or more): gpu2 fails a
    # task (a value its role refuses), gpu9 answers nothing.
    inventory = variant_inventory(
        tmp_path,
        {
            "gpu2": {**second_gpu_node, "nvidia_driver_branch": "many"},
            "gpu9": {"ansible_host": "10.213.7.99", "ansible_timeout": 3},
        },
    )
    proc = gpufleet("--json", "up", "-i", str(inventory))
    assert proc.returncode == 4, proc.stderr  # unreachable outranks failed
    document = summary_of(proc)
    failures = {f["host"]: f for f in document["failures"]}
    assert set(failures) == {"gpu2", "gpu9"}, failures
    assert not failures["gpu2"]["unreachable"] and "nvidia_driver_branch" in failures["gpu2"]["message"]
    assert failures["gpu9"]["unreachable"]
    assert re.search(r"gpu2\s+FAILED\s+.*nvidia_driver_branch", proc.stderr)
    # The others went on to the end: the nodes with every play, localhost with the cluster roles.
    for host in (GPU_NODE, TUNNEL_HOST, "localhost"):
        counts = document["hosts"][host]
        assert counts.get("failures", 0) == 0 and counts.get("dark", 0) == 0 and counts["ok"] > 5, host
    assert in_host(TUNNEL_HOST, f"systemctl is-active gpufleet-tunnel@{GPU_NODE}").stdout.strip() == "active"
    # gpu2 and gpu9 come first in the inventory, yet the lab's node keeps its slot (its port, 19401):
    # the new ones take the next free slots.
    assert slots() == {"gpu2": 2, "gpu9": 3, GPU_NODE: 1}
    assert "19401" in in_host(TUNNEL_HOST, f"cat /etc/gpufleet/tunnels/{GPU_NODE}.env").stdout
    # gpu2 and gpu9 leave the inventory: the next run removes their tunnels and targets.
    assert gpufleet("up", "-i", LAB).returncode == 0
    assert in_host(TUNNEL_HOST, "ls /etc/gpufleet/tunnels").stdout.split() == [f"{GPU_NODE}.env"]
    assert slots() == {GPU_NODE: 1}
    assert tunnel_targets_become([GPU_NODE]) == [GPU_NODE]


def test_ctrl_c_cancels_cleanly_and_a_rerun_converges(converged):
    proc = subprocess.Popen([*GPUFLEET, "up", "-i", LAB], stderr=subprocess.PIPE, text=True, cwd=lab.REPO_ROOT)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("play: Tunnels"):
            break
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, rest
    assert "canceled" in rest and "Re-run the same command" in rest
    # Each host's place: the task it was in, or (a cancel often lands between two tasks) the last it finished.
    assert re.search(r"(interrupted in|stopped after) '.+'", rest), rest
    # A re-run converges; nothing was left doubled.
    again = gpufleet("--json", "up", "-i", LAB)
    assert again.returncode == 0, again.stderr
    assert len(in_host(GPU_NODE, "cat /var/lib/gpufleet-tunnel/.ssh/authorized_keys").stdout.splitlines()) == 1
    assert tunnel_targets_become([GPU_NODE]) == [GPU_NODE]


PROGRESS = re.compile(rf"^({GPU_NODE}|{TUNNEL_HOST}|localhost) +\d+(/\d+)? tasks  changed \d+ +failed \d+ +\S")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_second_converge_in_a_real_terminal_changes_nothing_and_its_display_redraws_in_place(converged):
    """The converge after the previous test's re-run, in a real terminal: the live display, and the
    suite's proof that a converged lab's next converge changes nothing (a separate run for each
    would cost CI another minute)."""
    width = 72
    session = f"gpufleet-test-{os.getpid()}"
    command = f"cd {lab.REPO_ROOT} && {' '.join(GPUFLEET)} up -i {LAB}; echo EXIT=$?; sleep 30"
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", str(width), "-y", "40", command], check=True,
                   env=env)  # fmt: skip
    frames = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            frame = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True)
            frames.append(frame.stdout.splitlines())
            if "EXIT=" in frame.stdout:
                break
            time.sleep(0.15)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    final = "\n".join(frames[-1])
    assert "EXIT=0" in final, final
    live = [frame for frame in frames if any(PROGRESS.match(line) for line in frame)]
    assert len(live) > 10, "the display was not seen while the run went on"
    for frame in live:
        progress = [line for line in frame if PROGRESS.match(line)]
        # One line per host (redrawn in place, not scrolled), each complete and within the width.
        hosts = [line.split()[0] for line in progress]
        assert len(hosts) == len(set(hosts)), frame
        assert all(len(line) <= width - 1 for line in progress), frame
        summary_at = next((i for i, ln in enumerate(frame) if ln.startswith("site.yml:")), len(frame))
        before_summary = frame[:summary_at]
        stray = [ln for ln in before_summary if ln.strip() and not PROGRESS.match(ln)]
        assert not stray, f"partial or stray lines in the display: {stray}"
    # Done. The count is against what --list-tasks saw: a meta task reports nothing (62/63 on the
    # mirror host) and a dynamic include's tasks are not listed (a bare count, on the GPU node).
    assert re.search(rf"^{TUNNEL_HOST} +\d+(/\d+)? tasks .* done$", final, re.M), final
    # The nodes over SSH, localhost for the cluster roles applied through the clusters' APIs.
    found = re.finditer(rf"^({GPU_NODE}|{TUNNEL_HOST}|localhost) +\S+ tasks  changed (\d+)", final, re.M)
    assert {m[1]: int(m[2]) for m in found} == {TUNNEL_HOST: 0, GPU_NODE: 0, "localhost": 0}, final


def test_verify_prints_a_pass_fail_table(converged, tmp_path):
    inventory = variant_inventory(tmp_path, {})
    extra = {
        "gpufleet_inference_endpoints": [{"name": "nothing-listens", "url": "http://127.0.0.1:9", "model": "m"}],
        # A rule group no role applies: named as not loaded, after the timeout's wait.
        "gpufleet_alert_rule_groups": ["gpufleet-gpu", "gpufleet-vllm", "gpufleet-not-applied"],
        "gpufleet_verify_timeout": 10,
    }
    (inventory / "group_vars" / "all.yml").write_text(
        yaml.safe_dump({**yaml.safe_load((inventory / "group_vars" / "all.yml").read_text()), **extra})
    )
    proc = gpufleet("--json", "verify", "-i", str(inventory))
    assert proc.returncode == 3, proc.stderr
    checks = summary_of(proc)["checks"]
    rows = {(c["host"], c["check"]): c for c in checks}
    # Each check is a row with what it checked: the Prometheus target of every GPU node, each metric.
    dcgm = "DCGM metrics of every GPU node in Prometheus"
    target = rows[("localhost", f"{dcgm}: target {GPU_NODE}")]
    assert target["status"] == "passed" and "job gpufleet-dcgm" in target["target"], target
    metrics = [c for c in checks if c["check"].startswith(f"{dcgm}: DCGM_FI_")]
    assert len(metrics) >= 10 and all(c["status"] == "passed" for c in metrics), metrics
    # vLLM's series, carried from the GPU cluster by the same tunnel (two clusters: no ServiceMonitor there).
    target = rows[("localhost", f"vLLM metrics in Prometheus: target {GPU_NODE}")]
    assert target["status"] == "passed" and "job gpufleet-vllm" in target["target"], target
    series = [c for c in checks if c["check"].startswith("vLLM metrics in Prometheus: vllm:")]
    assert len(series) >= 10 and all(c["status"] == "passed" for c in series), series
    rules = rows[("localhost", "the collection's alert rules loaded in Prometheus")]
    assert rules["status"] == "failed" and "groups not loaded: gpufleet-not-applied;" in rules["detail"], rules
    assert "rules failing to evaluate: none" in rules["detail"], rules
    endpoint = [c for c in checks if c["check"].startswith("inference endpoint nothing-listens")]
    assert endpoint and endpoint[0]["status"] == "failed" and endpoint[0]["target"] == "http://127.0.0.1:9"
    # The lab's GPU node has no GPU: the driver check and the health gate are skipped, not
    # failed, and say why.
    for name in ("GPU driver and devices (driver new enough for DCGM 3.5)", "GPU health gate"):
        gpu = rows[(GPU_NODE, name)]
        assert gpu["status"] == "skipped" and gpu["detail"].startswith("skipped: "), gpu
    # The lab's vLLM does not autoscale nor roll out as a canary, and it runs no Triton: those rows are
    # skipped too.
    unused = ("autoscaling (ScaledObject, HPA, each trigger's metric)", "canary (Rollout phase, last analysis)")
    for engine in ("vLLM", "Triton"):
        for check in unused:
            row = rows[("localhost", f"{engine} {check}")]
            assert row["status"] == "skipped", row
    # No GPU node is quarantined by the remediation (playbooks/gpu_remediation.yml).
    out = rows[("localhost", "GPU nodes out of service (quarantine: cause and age)")]
    assert out["status"] == "passed" and "none quarantined" in out["detail"], out
    assert re.search(r"verify: \d+ passed, [1-9]\d* failed, 6 skipped", proc.stderr), proc.stderr
    failed_row = r"FAILED\s+localhost\s+inference endpoint nothing-listens: [\w-]+ +http://127.0.0.1:9"
    assert re.search(failed_row, proc.stderr), proc.stderr


def test_verify_and_bench_reach_the_deployed_vllm(converged, tmp_path):
    """The vllm role's Deployment of the lab's vLLM image (the calibration server behind `vllm serve`)
    runs on the GPU cluster's real node, holding the GPU the node advertises: verify's smoke check
    passes through its Service's node port, and bench measures it there, with the GPU's figures from
    the inventory's Prometheus."""
    from gpufleet_lab import k8s as labk8s
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(labk8s.kubeconfig_path("gpu"))))
    [pod] = core.list_namespaced_pod("inference", label_selector="app.kubernetes.io/name=vllm").items
    assert pod.spec.node_name == GPU_NODE and pod.status.phase == "Running", pod.status
    assert all(c.ready for c in pod.status.container_statuses)
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"

    proc = gpufleet("--json", "verify", "-i", str(lab.LAB_INVENTORY.parent))
    rows = [c for c in summary_of(proc)["checks"] if c["check"].startswith("inference endpoint vllm")]
    assert rows and all(r["status"] == "passed" for r in rows), rows
    assert all(r["target"].startswith("http://10.213.7.242:30800") for r in rows), rows
    assert proc.returncode == 0, proc.stderr

    bench = gpufleet("--json", "bench", "-i", str(lab.LAB_INVENTORY.parent), "--levels", "1,5", "--duration", "4",
                     "--warmup", "1", "--out", str(tmp_path / "bench"))  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    result = json.loads(bench.stdout)
    assert result["config"]["base_url"] == "http://10.213.7.242:30800"
    assert [lv["level"] for lv in result["levels"]] == [1, 5]
    for level in result["levels"]:
        assert level["completed"] > 0 and level["output_tokens"] > 0 and not sum(level["errors"].values()), level
    assert result["gpu_source"].startswith("prometheus"), result["gpu_source"]  # the inventory's Prometheus
    # The lab's DCGM exporter is the FIXTURE stand-in: its power and tokens per joule are marked as synthetic.
    assert result["gpu_stand_in"] == "dcgm-fixture" and "STAND-IN" in result["gpu_source"], result["gpu_source"]
    assert all(level["gpu"]["stand_in"] == "dcgm-fixture" for level in result["levels"])
    assert "no GPU was measured" in bench.stderr
    # The tokens it served reach the main cluster's Prometheus as vLLM's own counter, through the tunnel.
    served = sum(level["output_tokens"] for level in result["levels"])
    query = urllib.parse.urlencode(
        {"query": f'sum(vllm:generation_tokens_total{{job="gpufleet-vllm",instance="{GPU_NODE}"}})'}
    )
    deadline, counted = time.monotonic() + 60, 0.0
    while time.monotonic() < deadline and counted < served:
        with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/query?{query}", timeout=10) as answer:
            found = json.load(answer)["data"]["result"]
        counted = float(found[0]["value"][1]) if found else 0.0
        time.sleep(2)
    assert counted >= served, f"Prometheus counts {counted} generated tokens, the benchmark received {served}"


def test_plan_shows_each_change_as_a_diff_per_host_and_role_and_changes_nothing(converged):
    """One variable changed after a converge: check mode says that change, as a diff, and nothing else
    (every other task of site.yml on every host reports no change: a converged lab is idempotent in
    check mode too)."""
    proc = gpufleet("--json", "plan", "-i", LAB, "-e", "dcgm_exporter_collect_interval_ms=15000")
    assert proc.returncode == 0, proc.stderr
    document = summary_of(proc)
    assert document["check"] and "<dcgm_exporter_collect_interval_ms>" in document["options"]
    changed = {(host, role) for host, roles in document["changes"].items() for role in roles}
    assert changed == {("localhost", "dcgm_exporter")}, document["changes"]
    [diff] = [d["diff"] for d in document["diffs"]["localhost"]["dcgm_exporter"] if "DaemonSet" in d["diff"]]
    assert diff.startswith("--- DaemonSet gpu-monitoring/dcgm-exporter"), diff
    assert re.search(r"^-\s+- '30000'$", diff, re.M) and re.search(r"^\+\s+- '15000'$", diff, re.M), diff
    assert "managedFields" not in diff  # what the API server keeps by itself is no change of the user's
    assert "plan: what would change, per host and role" in proc.stderr and "+        - '15000'" in proc.stderr
    # A plan is a dry run: the exporter still runs with the inventory's interval.
    from gpufleet_lab import k8s as labk8s
    from kubernetes import client, config

    apps = client.AppsV1Api(config.new_client_from_config(str(labk8s.kubeconfig_path("gpu"))))
    args = apps.read_namespaced_daemon_set("dcgm-exporter", "gpu-monitoring").spec.template.spec.containers[0].args
    assert args[args.index("-c") + 1] == "30000"
