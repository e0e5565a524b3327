"""What the benchmarks measure of the controller: the peak memory of a process tree."""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path


class PeakMemory:
    """Samples the summed PSS of this process's descendants (ansible-playbook and its forks)."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval, self.peak_kib, self._stop = interval, 0, threading.Event()

    def __enter__(self) -> PeakMemory:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(pid) for pid in _descendants(os.getpid())))


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children[ppid].append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
