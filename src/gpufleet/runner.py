"""Run the collection's playbooks through ansible-runner and summarise the result."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import ansible_runner

from gpufleet.lab import REPO_ROOT

RUNS_DIR = REPO_ROOT / "runs"


@dataclass
class Failure:
    host: str
    task: str
    message: str
    unreachable: bool = False


@dataclass
class Summary:
    playbook: str
    status: str
    rc: int
    run_dir: str
    seconds: float
    hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    @property
    def unreachable(self) -> bool:
        return any(f.unreachable for f in self.failures)

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "unreachable": self.unreachable}


def _failure_from_event(event: dict[str, Any]) -> Failure | None:
    kind = event.get("event")
    data = event.get("event_data", {})
    if kind not in ("runner_on_failed", "runner_on_unreachable") or data.get("ignore_errors"):
        return None
    result = data.get("res", {})
    message = result.get("msg") or result.get("stderr") or result.get("reason") or "failed"
    return Failure(data.get("host", "?"), data.get("task", "?"), str(message).strip(), kind == "runner_on_unreachable")


def run_playbook(
    playbook: str,
    inventory: Path,
    limit: str | None = None,
    tags: str | None = None,
    check: bool = False,
    quiet: bool = False,
) -> Summary:
    ident = time.strftime("%Y%m%dT%H%M%S") + ("-check" if check else "")
    # One private data dir per run: ansible-runner writes the run's settings
    # (cmdline, envvars) into it, and a shared one would hand them to the next run.
    private = RUNS_DIR / ident
    suffix = 1
    while private.exists():
        private = RUNS_DIR / f"{ident}.{suffix}"
        suffix += 1
    private.mkdir(parents=True)
    failures: list[Failure] = []

    def on_event(event: dict[str, Any]) -> bool:
        failure = _failure_from_event(event)
        if failure:
            failures.append(failure)
        return True

    cmdline = " ".join(filter(None, ["--check --diff" if check else "", f"--tags {tags}" if tags else ""]))
    started = time.monotonic()
    result = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO_ROOT),
        playbook=str(REPO_ROOT / playbook),
        inventory=str(inventory.resolve()),
        ident="run",
        limit=limit,
        cmdline=cmdline or None,
        event_handler=on_event,
        quiet=quiet,
        envvars={
            "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
            # ansible-playbook from the same environment as this CLI, even when it is not activated.
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        },
    )
    stats = result.stats or {}
    hosts: dict[str, dict[str, int]] = {}
    for key in ("ok", "changed", "failures", "dark", "skipped"):
        for host, count in (stats.get(key) or {}).items():
            hosts.setdefault(host, {})[key] = count
    return Summary(
        playbook, result.status, result.rc, str(private / "artifacts" / "run"), round(time.monotonic() - started, 1),
        hosts, failures,
    )  # fmt: skip


def print_summary(summary: Summary, out: IO[str]) -> None:
    print(f"\n{summary.playbook}: {summary.status} in {summary.seconds:.1f}s (artifacts: {summary.run_dir})", file=out)
    print(f"{'host':16} {'ok':>5} {'changed':>8} {'failed':>7} {'unreachable':>12}", file=out)
    for host, counts in sorted(summary.hosts.items()):
        print(
            f"{host:16} {counts.get('ok', 0):5} {counts.get('changed', 0):8} {counts.get('failures', 0):7}"
            f" {counts.get('dark', 0):12}",
            file=out,
        )
    if summary.failures:
        print("\nfailures:", file=out)
        for f in summary.failures:
            print(f"  {f.host}: {f.task}: {f.message}", file=out)
