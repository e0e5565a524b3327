"""The live display of a run: one line per host, redrawn in place on a terminal.

On a terminal every frame is drawn with a single write, lines cut to the window's
width (a wrapped line would break the redraw). Elsewhere (CI logs, pipes) it
prints plays and failures as they happen, one complete line each.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from typing import Any, TextIO

RESULTS = ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable")
FRAME_INTERVAL_S = 0.1


@dataclass
class HostLine:
    done: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: bool = False
    task: str = ""


class Progress:
    def __init__(self, out: TextIO, totals: dict[str, int], live: bool | None = None) -> None:
        self.out = out
        self.totals = totals
        self.live = out.isatty() if live is None else live
        self.hosts: dict[str, HostLine] = {}
        self.play = ""
        self._in_handlers = False
        self._drawn = 0
        self._last_frame = 0.0

    # -- events --------------------------------------------------------------
    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
            if not self.live:
                self._print(f"play: {self.play}")
        elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self._in_handlers = kind == "playbook_on_handler_task_start"
        elif kind == "runner_on_start" and data.get("host"):
            self.hosts.setdefault(data["host"], HostLine()).task = _task_label(data)
        elif kind in RESULTS and data.get("host"):
            self._result(kind, data)
        else:
            return
        self._draw()

    def _result(self, kind: str, data: dict[str, Any]) -> None:
        line = self.hosts.setdefault(data["host"], HostLine())
        line.task = ""
        ignored = data.get("ignore_errors")
        if kind == "runner_on_ok" and data.get("res", {}).get("changed"):
            line.changed += 1
        elif kind == "runner_on_failed" and not ignored:
            line.failed += 1
        elif kind == "runner_on_unreachable":
            line.unreachable = True
        # Fact gathering and handlers are not in the static task list the totals come from.
        if data.get("task") != "Gathering Facts" and not self._in_handlers:
            line.done += 1
        if not self.live and (kind == "runner_on_unreachable" or (kind == "runner_on_failed" and not ignored)):
            message = str(data.get("res", {}).get("msg", "")).splitlines()[:1]
            state = "UNREACHABLE" if kind == "runner_on_unreachable" else "FAILED"
            self._print(f"  {state} {data['host']}: {_task_label(data)}: {' '.join(message)}")

    # -- drawing -------------------------------------------------------------
    def lines(self, width: int) -> list[str]:
        name_width = max([len(h) for h in self.hosts] + [4])
        out = []
        for host, line in sorted(self.hosts.items()):
            total = self.totals.get(host, 0)
            count = f"{line.done}/{total}" if total >= line.done else f"{line.done}"
            state = "UNREACHABLE" if line.unreachable else ("FAILED" if line.failed else "")
            text = (
                f"{host:{name_width}} {count:>7} tasks  changed {line.changed:<3} failed {line.failed:<2} "
                f"{state or line.task or '-'}"
            )
            out.append(_fit(text, width))
        return out

    def _draw(self, final: bool = False) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if not final and now - self._last_frame < FRAME_INTERVAL_S:
            return
        self._last_frame = now
        width = shutil.get_terminal_size((100, 24)).columns - 1
        lines = self.lines(width)
        # Up to the first line of the block, then every line cleared and rewritten: one write.
        frame = (f"\x1b[{self._drawn}F" if self._drawn else "\x1b[?25l") + "".join(f"\x1b[2K{ln}\n" for ln in lines)
        if final:
            frame += "\x1b[?25h"
        self.out.write(frame)
        self.out.flush()
        self._drawn = len(lines)

    def finish(self, cancelled: bool = False) -> None:
        for line in self.hosts.values():
            if cancelled:
                line.task = f"cancelled in {line.task}" if line.task else "cancelled"
            elif not (line.failed or line.unreachable):
                line.task = "done"
        self._draw(final=True)

    def _print(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()


def _task_label(data: dict[str, Any]) -> str:
    role = data.get("role")
    task = str(data.get("task", ""))
    return f"{role} : {task}" if role and not task.startswith(f"{role} :") else task


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
