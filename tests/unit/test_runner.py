"""Turning ansible-runner events into the failure table; runs kept apart."""

import json
from pathlib import Path

from gpufleet.runner import Summary, _failure_from_event


def test_failed_and_unreachable_events():
    failed = _failure_from_event(
        {"event": "runner_on_failed", "event_data": {"host": "gpu1", "task": "Install", "res": {"msg": "no package"}}}
    )
    assert failed is not None and (failed.host, failed.task, failed.message) == ("gpu1", "Install", "no package")
    dark = _failure_from_event({"event": "runner_on_unreachable", "event_data": {"host": "gpu2", "res": {"msg": "x"}}})
    assert dark is not None and dark.unreachable


def test_ignored_failures_and_other_events_are_not_failures():
    assert _failure_from_event({"event": "runner_on_failed", "event_data": {"ignore_errors": True}}) is None
    assert _failure_from_event({"event": "runner_on_ok", "event_data": {}}) is None


def test_summary_exit_semantics():
    s = Summary("site.yml", "successful", 0, "/tmp/x", 1.0)
    assert s.ok and not s.unreachable


def test_a_check_run_does_not_leak_into_the_next_run(tmp_path, monkeypatch):
    # ansible-runner stores a run's cmdline in its private data dir: each run must get its own.
    import gpufleet.runner as runner

    monkeypatch.setattr(runner, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setattr(runner, "REPO_ROOT", tmp_path)
    (tmp_path / "noop.yml").write_text("- hosts: localhost\n  gather_facts: false\n  tasks: []\n")
    inventory = tmp_path / "hosts"
    inventory.write_text("localhost ansible_connection=local\n")
    checked = runner.run_playbook("noop.yml", inventory, check=True, quiet=True)
    plain = runner.run_playbook("noop.yml", inventory, quiet=True)

    def command(summary):
        return json.loads((Path(summary.run_dir) / "command").read_text())["command"]

    assert "--check" in command(checked)
    assert "--check" not in command(plain)
