"""The live display: lines per host from runner events, cut to the width, one write per frame."""

import io

import jsonschema
import pytest

from gpufleet import display, runner


def ev(kind, **data):
    return {"event": kind, "event_data": data}


class Terminal(io.StringIO):
    def __init__(self):
        super().__init__()
        self.writes = 0

    def write(self, s):
        self.writes += 1
        return super().write(s)


def test_counts_tasks_changes_and_the_running_task(monkeypatch):
    monkeypatch.setattr(display, "FRAME_INTERVAL_S", 0)
    out = Terminal()
    progress = display.Progress(out, {"gpu1": 3}, live=True)
    progress(ev("playbook_on_play_start", play="p"))
    progress(ev("runner_on_start", host="gpu1", task="Gathering Facts"))
    progress(ev("runner_on_ok", host="gpu1", task="Gathering Facts", res={}))
    progress(ev("runner_on_start", host="gpu1", task="Install", role="tunnel"))
    assert progress.lines(200) == ["gpu1     0/3 tasks  changed 0   failed 0  tunnel : Install"]
    progress(ev("runner_on_ok", host="gpu1", task="Install", role="tunnel", res={"changed": True}))
    progress(ev("runner_on_failed", host="gpu1", task="Start", res={"msg": "no"}))
    assert progress.lines(200) == ["gpu1     2/3 tasks  changed 1   failed 1  FAILED"]
    writes = out.writes
    progress.finish()
    assert out.writes == writes + 1  # a frame is one write
    # Each frame after the first goes back up over the block it drew before.
    assert "\x1b[1F" in out.getvalue()


def test_lines_are_cut_to_the_width():
    progress = display.Progress(io.StringIO(), {}, live=True)
    progress(ev("runner_on_start", host="m1", task="x" * 300))
    [line] = progress.lines(60)
    assert len(line) == 60 and line.endswith("…")


def test_off_a_terminal_only_plays_and_failures_are_printed():
    out = io.StringIO()
    progress = display.Progress(out, {}, live=False)
    progress(ev("playbook_on_play_start", play="Tunnels"))
    progress(ev("runner_on_ok", host="m1", task="A", res={"changed": True}))
    progress(ev("runner_on_unreachable", host="gpu9", task="Gathering Facts", res={"msg": "timed out\nmore"}))
    assert out.getvalue() == "play: Tunnels\n  UNREACHABLE gpu9: Gathering Facts: timed out\n"


def test_a_summary_document_matches_the_published_schema():
    import json

    schema = json.loads(runner.SUMMARY_SCHEMA.read_text())
    summary = runner.Summary("site.yml", "failed", 2, "/r", 1.0, hosts={"gpu1": {"ok": 1, "dark": 1}})
    summary.failures.append(runner.Failure("gpu1", "Gathering Facts", "timed out", True))
    jsonschema.validate(summary.as_dict(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**summary.as_dict(), "status": "exploded"}, schema)
