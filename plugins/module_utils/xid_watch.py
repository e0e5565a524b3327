# SPDX-License-Identifier: Apache-2.0
"""Watch a node's GPUs for XID events through NVML, read-only, and print each as a JSON line with the
class the remediation gives it (module_utils/xid.py).

dcgm-exporter is the fleet's source of XIDs (its DCGM_FI_DEV_XID_ERRORS feeds GPUXidError); this is the
same event straight from the driver, for a node without DCGM and for checking that a busy GPU raises
none: `python3 -m gpufleet.lib.xid_watch --seconds 600` registers for critical XID events (and double-bit
ECC errors where the GPU reports them), waits, and ends with a summary line. Registering for events
changes nothing on the GPU.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

# Relative: the collection's module_utils, and the gpufleet wheel's gpufleet.lib.
from .xid import NONE, XIDS


def classify(xid: int) -> dict[str, str]:
    action, text = XIDS.get(xid, (NONE, "not in the table"))
    return {"action": action, "meaning": text}


_stopped: list[int] = []  # a signal that ends the watch early (the summary is still returned)


def watch(seconds: float, nvml: Any = None) -> dict[str, Any]:
    """Wait for events for ``seconds`` (or until SIGTERM); every event is printed as it comes, the summary
    returned."""
    if nvml is None:
        import pynvml as nvml  # type: ignore[no-redef]  # nvidia-ml-py
    nvml.nvmlInit()
    try:
        events = nvml.nvmlEventSetCreate()
        wanted = nvml.nvmlEventTypeXidCriticalError | nvml.nvmlEventTypeDoubleBitEccError
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            supported = nvml.nvmlDeviceGetSupportedEventTypes(handle) & wanted
            nvml.nvmlDeviceRegisterEvents(handle, supported, events)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            gpus.append({"index": index, "uuid": uuid if isinstance(uuid, str) else uuid.decode(),
                         "xid_events": bool(supported & nvml.nvmlEventTypeXidCriticalError)})  # fmt: skip
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + seconds
        started = time.monotonic()
        while (left := deadline - time.monotonic()) > 0 and not _stopped:
            try:
                data = nvml.nvmlEventSetWait_v2(events, int(min(left, 1.0) * 1000))
            except nvml.NVMLError_Timeout:
                continue
            kind = "xid" if data.eventType == nvml.nvmlEventTypeXidCriticalError else "double_bit_ecc"
            event = {"time": time.time(), "kind": kind, "uuid": _uuid(nvml, data.device), "xid": int(data.eventData)}
            if kind == "xid":
                event.update(classify(int(data.eventData)))
            seen.append(event)
            print(json.dumps(event), flush=True)
        nvml.nvmlEventSetFree(events)
        return {"seconds": round(time.monotonic() - started, 1), "gpus": gpus, "events": len(seen),
                "faults": sum(e.get("action", "reset") != NONE for e in seen)}  # fmt: skip
    finally:
        nvml.nvmlShutdown()


def _uuid(nvml: Any, handle: Any) -> str:
    uuid = nvml.nvmlDeviceGetUUID(handle)
    return uuid if isinstance(uuid, str) else uuid.decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, required=True, help="how long to watch")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, _frame: _stopped.append(signum))
    summary = watch(args.seconds)
    print(json.dumps({"summary": summary}), flush=True)
    return 1 if summary["faults"] else 0


if __name__ == "__main__":
    sys.exit(main())
