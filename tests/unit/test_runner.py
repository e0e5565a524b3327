"""Turning ansible-runner events into the failure table."""

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
