"""The NVML XID watcher, against a stand-in of pynvml's calls: each event a JSON line with its class."""

from __future__ import annotations

import json
import types

from ansible_collections.gpufleet.platform.plugins.module_utils import xid_watch


class Timeout(Exception):
    pass


def fake_nvml(events: list[tuple[int, int]]):
    """pynvml's names, with a GPU that supports XID events and delivers ``events`` (type, data) in turn."""
    calls: list[str] = []
    queue = list(events)

    def wait(_set, _timeout_ms):
        if not queue:
            raise Timeout
        kind, data = queue.pop(0)
        return types.SimpleNamespace(eventType=kind, eventData=data, device="h0")

    nvml = types.SimpleNamespace(
        nvmlEventTypeXidCriticalError=8, nvmlEventTypeDoubleBitEccError=2, NVMLError_Timeout=Timeout,
        nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlEventSetCreate=lambda: "set", nvmlEventSetFree=lambda s: calls.append("free"),
        nvmlDeviceGetCount=lambda: 1, nvmlDeviceGetHandleByIndex=lambda i: "h0",
        nvmlDeviceGetSupportedEventTypes=lambda h: 8 | 2 | 1,
        nvmlDeviceRegisterEvents=lambda h, kinds, s: calls.append(f"register {kinds}"),
        nvmlDeviceGetUUID=lambda h: b"GPU-1", nvmlEventSetWait_v2=wait,
    )  # fmt: skip
    return nvml, calls


def test_each_event_is_printed_with_its_class_and_counted(capsys):
    nvml, calls = fake_nvml([(8, 13), (8, 79)])
    summary = xid_watch.watch(0.05, nvml)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["xid"], e["action"]) for e in lines] == [(13, "none"), (79, "reboot")]
    assert summary["events"] == 2 and summary["faults"] == 1
    assert summary["gpus"] == [{"index": 0, "uuid": "GPU-1", "xid_events": True}]
    assert calls[0] == "init" and "register 10" in calls and calls[-2:] == ["free", "shutdown"]


def test_a_quiet_gpu_gives_no_event():
    nvml, _ = fake_nvml([])
    assert xid_watch.watch(0.05, nvml)["events"] == 0
