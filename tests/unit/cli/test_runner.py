"""Turning ansible-runner events into the failure table; runs kept apart."""

import io
import json
from pathlib import Path

import pytest

from gpufleet import runner
from gpufleet.runner import Summary, Tracker, _failures_from_event, print_summary


def test_failed_and_unreachable_events():
    [failed] = _failures_from_event(
        {"event": "runner_on_failed", "event_data": {"host": "gpu1", "task": "Install", "res": {"msg": "no package"}}}
    )
    assert (failed.host, failed.task, failed.message) == ("gpu1", "Install", "no package")
    [dark] = _failures_from_event(
        {"event": "runner_on_unreachable", "event_data": {"host": "gpu2", "res": {"msg": "x"}}}
    )
    assert dark.unreachable


def test_a_delegated_loop_names_the_host_it_could_not_reach():
    results = [{"item": "gpu1"}, {"item": "gpu9", "unreachable": True, "msg": "Connection timed out"}]
    event = {"event": "runner_on_unreachable", "event_data": {"host": "m1", "task": "T", "res": {"results": results}}}
    [dark] = _failures_from_event(event)
    assert (dark.host, dark.message, dark.unreachable) == ("gpu9", "Connection timed out", True)


def test_an_unreachable_host_is_reported_once():
    tracker = Tracker()
    for task in ("Gathering Facts", "Install"):
        tracker({"event": "runner_on_unreachable", "event_data": {"host": "gpu9", "task": task, "res": {"msg": "x"}}})
    assert [(f.host, f.task) for f in tracker.failures] == [("gpu9", "Gathering Facts")]


def test_changes_are_recorded_per_host_and_role():
    tracker = Tracker()
    ok = {"host": "m1", "role": "telemetry_tunnel", "task": "Write unit", "res": {"changed": True}}
    tracker({"event": "runner_on_ok", "event_data": ok})
    tracker({"event": "runner_on_ok", "event_data": {**ok, "task": "Read", "res": {"changed": False}}})
    assert tracker.changes == {"m1": {"telemetry_tunnel": ["Write unit"]}}


def test_a_cancel_names_each_hosts_place_running_or_between_tasks():
    tracker = Tracker()
    events = [("runner_on_start", "m1", "Pin key"), ("runner_on_ok", "m1", "Pin key"),
              ("runner_on_start", "gpu1", "Start tunnel"), ("runner_on_start", "m1", "Write unit")]  # fmt: skip
    for kind, host, task in events:
        tracker({"event": kind, "event_data": {"host": host, "task": task, "res": {}}})
    assert tracker.running == {"gpu1": "Start tunnel", "m1": "Write unit"}
    tracker({"event": "runner_on_ok", "event_data": {"host": "m1", "task": "Write unit", "res": {}}})
    assert tracker.running == {"gpu1": "Start tunnel"} and tracker.finished == {"m1": "Write unit"}
    summary = Summary("site.yml", "canceled", 130, "/tmp/x", 1.0, interrupted=tracker.running,
                      stopped_after={"m1": "Write unit"})  # fmt: skip
    out = io.StringIO()
    print_summary(summary, out)
    assert "gpu1: interrupted in 'Start tunnel'" in out.getvalue()
    assert "m1: stopped after 'Write unit'" in out.getvalue()


def test_ignored_failures_and_other_events_are_not_failures():
    assert _failures_from_event({"event": "runner_on_failed", "event_data": {"ignore_errors": True}}) == []
    assert _failures_from_event({"event": "runner_on_ok", "event_data": {}}) == []


def test_summary_exit_semantics():
    s = Summary("site.yml", "successful", 0, "/tmp/x", 1.0)
    assert s.ok and not s.unreachable


def test_a_check_run_does_not_leak_into_the_next_run(tmp_path, monkeypatch):
    # ansible-runner stores a run's cmdline in its private data dir: each run must get its own.
    import gpufleet.runner as runner

    monkeypatch.setattr(runner, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setattr(runner, "collection_dir", lambda: tmp_path)
    (tmp_path / "noop.yml").write_text("- hosts: localhost\n  gather_facts: false\n  tasks: []\n")
    inventory = tmp_path / "hosts"
    inventory.write_text("localhost ansible_connection=local\n")
    checked = runner.run_playbook("noop.yml", inventory, check=True, quiet=True)
    plain = runner.run_playbook("noop.yml", inventory, quiet=True)

    def command(summary):
        return json.loads((Path(summary.run_dir) / "command").read_text())["command"]

    assert "--check" in command(checked)
    assert "--check" not in command(plain)


def test_runs_started_at_once_each_get_their_own_folder(tmp_path, monkeypatch):
    # AWX-style slices started from threads in the same second: each claims a folder of its own.
    from concurrent.futures import ThreadPoolExecutor

    import gpufleet.runner as runner

    monkeypatch.setattr(runner, "RUNS_DIR", tmp_path / "runs")
    with ThreadPoolExecutor(8) as pool:
        folders = list(pool.map(lambda _: runner._new_private_dir(False), range(8)))
    assert len(set(folders)) == 8 and all(f.is_dir() for f in folders)


def test_check_tasks_become_rows_of_the_verify_table():
    tracker = Tracker()
    ok = {"host": "localhost", "task": "Check: DCGM metrics", "res": {"msg": "19 metric(s) ok"}}
    tracker({"event": "runner_on_ok", "event_data": ok})
    skipped = {"host": "gpu1", "task": "Check: GPU driver", "res": {"false_condition": "gpufleet_gpu_present"}}
    tracker({"event": "runner_on_skipped", "event_data": skipped})
    items = [
        {"_ansible_item_label": "vllm", "msg": "openai endpoint: health, models, completion ok"},
        {"_ansible_item_label": "triton", "failed": True, "msg": "kserve_v2 endpoint: ready: 503"},
    ]
    looped = {"host": "localhost", "task": "Check: inference endpoint", "res": {"results": items}}
    tracker({"event": "runner_on_failed", "event_data": looped})
    empty = {**looped, "res": {"results": [], "skipped": True, "skipped_reason": "No items in the list"}}
    tracker({"event": "runner_on_skipped", "event_data": empty})
    rows = [(c.host, c.check, c.status) for c in tracker.checks]
    assert rows == [
        ("localhost", "DCGM metrics", "passed"),
        ("gpu1", "GPU driver", "skipped"),
        ("localhost", "inference endpoint vllm", "passed"),
        ("localhost", "inference endpoint triton", "failed"),
        ("localhost", "inference endpoint", "skipped"),
    ]
    assert tracker.checks[3].detail == "kserve_v2 endpoint: ready: 503"
    assert tracker.checks[4].detail == "nothing listed to check"
    assert tracker.checks[1].detail == "skipped: gpufleet_gpu_present"


def test_module_reported_parts_become_rows_with_their_targets():
    tracker = Tracker()
    dcgm = {
        "msg": "2 metric(s) ok",
        "job": "gpufleet-dcgm",
        "invocation": {"module_args": {"url": "http://prom:9090", "job": "gpufleet-dcgm"}},
        "targets": [{"instance": "gpu1", "scrape_url": "http://10.0.0.2:19401/metrics", "health": "up",
                     "last_error": "", "job": "gpufleet-dcgm"}],
        "metrics": [{"metric": "DCGM_FI_DEV_GPU_TEMP", "status": "ok", "detail": "", "instances": ["gpu1"]},
                    {"metric": "DCGM_FI_DEV_XID_ERRORS", "status": "stale", "detail": "40 s old", "instances": []}],
    }  # fmt: skip
    tracker({"event": "runner_on_failed", "event_data": {"host": "localhost", "task": "Check: DCGM", "res": dcgm}})
    smoke = {"url": "http://vllm:8000", "checks": [{"name": "health", "ok": True, "detail": "ok", "seconds": 0.1}]}
    item = {"_ansible_item_label": "vllm", **smoke}
    tracker({"event": "runner_on_ok", "event_data": {"host": "localhost", "task": "Check: endpoint",
                                                     "res": {"results": [item]}}})  # fmt: skip
    rows = [(c.check, c.status, c.target, c.detail) for c in tracker.checks]
    assert rows == [
        ("DCGM: target gpu1", "passed", "http://prom:9090 job gpufleet-dcgm http://10.0.0.2:19401/metrics", "up"),
        ("DCGM: DCGM_FI_DEV_GPU_TEMP", "passed", "http://prom:9090 job gpufleet-dcgm", "ok on gpu1"),
        ("DCGM: DCGM_FI_DEV_XID_ERRORS", "failed", "http://prom:9090 job gpufleet-dcgm", "stale (40 s old)"),
        ("endpoint vllm: health", "passed", "http://vllm:8000", "ok"),
    ]


def test_a_failed_check_without_parts_is_a_failed_row():
    """Prometheus unreachable: no targets or metrics to list, and the event's result has no "failed" key."""
    tracker = Tracker()
    res = {"msg": "cannot reach Prometheus at http://prom:30090: Connection refused", "job": "gpufleet-dcgm",
           "targets": [], "metrics": [], "invocation": {"module_args": {"url": "http://prom:30090"}}}  # fmt: skip
    tracker({"event": "runner_on_failed", "event_data": {"host": "localhost", "task": "Check: DCGM", "res": res}})
    [row] = tracker.checks
    assert (row.check, row.status) == ("DCGM", "failed") and "Connection refused" in row.detail


def test_the_bench_target_comes_from_the_inventory(tmp_path):
    from gpufleet.runner import bench_target, inventory_vars

    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n")
    (tmp_path / "group_vars" / "all.yml").write_text(
        "gpufleet_inference_endpoints:\n"
        "  - {name: triton, url: 'http://t:8000', model: resnet, kind: kserve_v2}\n"
        "  - {name: vllm, url: 'http://v:8000', model: opt}\n"
    )
    assert bench_target(inventory_vars(tmp_path)) == ("http://v:8000", "opt", None)
    (tmp_path / "group_vars" / "all.yml").write_text("other: 1\n")
    assert bench_target(inventory_vars(tmp_path)) is None


def test_the_bench_reads_the_inventorys_prometheus_unless_it_is_a_template(tmp_path):
    from gpufleet.runner import inventory_prometheus_url, inventory_vars

    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n")
    (tmp_path / "group_vars" / "all.yml").write_text("gpufleet_prometheus_url: http://10.0.0.5:30090\n")
    assert inventory_prometheus_url(inventory_vars(tmp_path)) == "http://10.0.0.5:30090"
    (tmp_path / "group_vars" / "all.yml").write_text("gpufleet_prometheus_url: \"{{ lookup('env', 'P') }}\"\n")
    assert inventory_prometheus_url(inventory_vars(tmp_path)) is None


def test_verify_rows_fit_the_run_summary_schema():
    import jsonschema

    from gpufleet import runner
    from gpufleet.runner import CheckRow

    schema = json.loads((Path(runner.__file__).parent / "run-summary.schema.json").read_text())
    rows = [CheckRow("localhost", "DCGM: target gpu1", "passed", "up", "http://prom:9090 job gpufleet-dcgm")]
    summary = Summary("playbooks/verify.yml", "successful", 0, "runs/x", 1.0, checks=rows)
    jsonschema.validate(summary.as_dict(), schema)


def test_health_gate_rows_one_per_check():
    from gpufleet.runner import _rows

    item = {
        "failed": True,
        "msg": "pcie_link: x8 of x16",
        "checks": [
            {"name": "pcie_link", "verdict": "fail", "evidence": "GPU 0: x8 of x16"},
            {"name": "throttle_reasons", "verdict": "warn", "evidence": "active: sw_power_cap"},
            {"name": "dcgm_diag", "verdict": "skip", "evidence": "dcgmi is not installed"},
        ],
    }
    rows = _rows("gpu1", "GPU health gate", item)
    assert [(r.check, r.status) for r in rows] == [
        ("GPU health gate: pcie_link", "failed"),
        ("GPU health gate: throttle_reasons", "passed"),
        ("GPU health gate: dcgm_diag", "skipped"),
    ]
    assert rows[1].detail == "warning: active: sw_power_cap"


def test_site_playbook_is_site_yml_or_the_inventorys_own_inside_the_checkout():
    from gpufleet import runner

    assert runner.site_playbook({}) == "site.yml"
    assert runner.site_playbook({"gpufleet_site_playbook": "lab/site.yml"}) == "lab/site.yml"
    for bad in ("../site.yml", "/etc/passwd", "playbooks/nothing.yml", ["site.yml"]):
        with pytest.raises(ValueError, match="gpufleet_site_playbook="):
            runner.site_playbook({"gpufleet_site_playbook": bad})


def test_plan_shows_each_changed_tasks_diff_per_host_and_role():
    tracker = Tracker()
    k8s = {"before": {"spec": {"replicas": 1}}, "after": {"spec": {"replicas": 2}}}
    template = [
        {"before": "port=1\n", "after": "port=2\n", "before_header": "/etc/a.env", "after_header": "/etc/a.env"}
    ]
    for role, task, diff in (("vllm", "Apply the Deployment", k8s), ("telemetry_tunnel", "Write the env", template)):
        data = {"host": "localhost", "task": task, "role": role, "res": {"changed": True, "diff": diff}}
        tracker({"event": "runner_on_ok", "event_data": data})
    unchanged = {
        "host": "localhost",
        "task": "Same",
        "role": "vllm",
        "res": {"changed": True, "diff": {"before": "x", "after": "x"}},
    }
    tracker({"event": "runner_on_ok", "event_data": unchanged})
    summary = Summary("site.yml", "successful", 0, "runs/x", 1.0, True, changes=tracker.changes, diffs=tracker.diffs)
    out = io.StringIO()
    runner.print_plan(summary, out)
    text = out.getvalue()
    assert "    -  replicas: 1\n" in text and "    +  replicas: 2\n" in text
    assert "--- /etc/a.env" in text and "-port=1" in text and "+port=2" in text
    assert [d["task"] for d in tracker.diffs["localhost"]["vllm"]] == ["Apply the Deployment"]


def test_a_long_diff_is_cut_on_the_terminal_and_kept_whole_in_the_summary():
    after = {f"key{i}": i for i in range(200)}
    data = {
        "host": "h",
        "task": "Apply CRD",
        "role": "monitoring",
        "res": {"changed": True, "diff": {"before": {}, "after": after}},
    }
    tracker = Tracker()
    tracker({"event": "runner_on_ok", "event_data": data})
    summary = Summary("site.yml", "successful", 0, "runs/x", 1.0, True, changes=tracker.changes, diffs=tracker.diffs)
    out = io.StringIO()
    runner.print_plan(summary, out)
    assert "more line(s): the whole diff is in runs/x/summary.json" in out.getvalue()
    assert "+key199: 199" in tracker.diffs["h"]["monitoring"][0]["diff"]
