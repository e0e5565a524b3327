"""Run the collection's playbooks through ansible-runner and summarise the result."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

# The checkout: the playbooks, inventories and roles the CLI runs.
REPO_ROOT = Path(__file__).resolve().parents[2]
RUNS_DIR = REPO_ROOT / "runs"
CHECK_PREFIX = "Check: "
SUMMARY_FILE = "summary.json"
SUMMARY_SCHEMA = Path(__file__).parent / "run-summary.schema.json"

Event = dict[str, Any]


@dataclass
class Failure:
    host: str
    task: str
    message: str
    unreachable: bool = False


@dataclass
class CheckRow:
    """A row of the verification table: a task named "Check: ..." on one host."""

    host: str
    check: str
    status: str  # passed | failed | skipped
    detail: str
    target: str = ""  # what was checked: a Prometheus target, an endpoint URL, a host


@dataclass
class Summary:
    playbook: str
    status: str
    rc: int
    run_dir: str
    seconds: float
    check: bool = False
    hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    # host -> role ("" for play tasks) -> names of the tasks that changed (or would, in check mode)
    changes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # host -> the task it was running when the run was cancelled
    interrupted: dict[str, str] = field(default_factory=dict)
    # host -> the last task it finished, for a host between two tasks when the run was cancelled
    stopped_after: dict[str, str] = field(default_factory=dict)
    checks: list[CheckRow] = field(default_factory=list)

    @property
    def unreachable(self) -> bool:
        return any(f.unreachable for f in self.failures)

    @property
    def cancelled(self) -> bool:
        return self.status == "canceled"

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.failures and not self.cancelled

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "unreachable": self.unreachable, "cancelled": self.cancelled}


def _failures_from_event(event: Event) -> list[Failure]:
    kind = event.get("event")
    data = event.get("event_data", {})
    if kind not in ("runner_on_failed", "runner_on_unreachable") or data.get("ignore_errors"):
        return []
    host, task, result = data.get("host", "?"), data.get("task", "?"), data.get("res", {})
    # A loop delegated to other hosts (a tunnel host reaching its GPU nodes) names
    # the host that could not be reached in each item, not in the task.
    items = [r for r in result.get("results", []) if r.get("unreachable") or r.get("failed")]
    if kind == "runner_on_unreachable" and items:
        return [Failure(str(r.get("item", host)), task, _message(r), True) for r in items if r.get("unreachable")]
    return [Failure(host, task, _message(result), kind == "runner_on_unreachable")]


def _message(result: dict[str, Any]) -> str:
    return str(result.get("msg") or result.get("stderr") or result.get("reason") or "failed").strip()


class Tracker:
    """Follows a run's events: failures, what changed, and what each host is doing now."""

    def __init__(self) -> None:
        self.failures: list[Failure] = []
        self.changes: dict[str, dict[str, list[str]]] = {}
        self.running: dict[str, str] = {}  # host -> task started and not finished
        self.finished: dict[str, str] = {}  # host -> the last task it finished
        self.checks: list[CheckRow] = []

    def __call__(self, event: Event) -> None:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host, task = data.get("host"), data.get("task", "")
        if kind == "runner_on_start" and host:
            self.running[host] = task
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable") and host:
            self.running.pop(host, None)
            self.finished[host] = task
            if kind == "runner_on_ok" and data.get("res", {}).get("changed"):
                self.changes.setdefault(host, {}).setdefault(data.get("role", ""), []).append(task)
            if task.startswith(CHECK_PREFIX) and kind != "runner_on_unreachable":
                self._check(kind, host, task, data.get("res", {}))
        for failure in _failures_from_event(event):
            # One line per unreachable host is enough: later tasks fail for the same reason.
            if not (failure.unreachable and any(f.unreachable and f.host == failure.host for f in self.failures)):
                self.failures.append(failure)

    def _check(self, kind: str, host: str, task: str, result: dict[str, Any]) -> None:
        name = task.removeprefix(CHECK_PREFIX)
        if "results" in result and not result["results"]:
            self.checks.append(CheckRow(host, name, "skipped", "nothing listed to check", host))
            return
        if kind == "runner_on_skipped":
            reason = str(
                result.get("false_condition")
                or result.get("skipped_reason")
                or result.get("skip_reason")
                or "condition false"
            )
            self.checks.append(CheckRow(host, name, "skipped", f"skipped: {reason}", host))
            return
        # A looped check has one row per item, and a module that reports its own checks a row per check.
        # A failed task's result has no "failed" key in its event (its items do): the event says it.
        for item in result.get("results") or [{**result, "failed": result.get("failed", kind == "runner_on_failed")}]:
            label = item.get("_ansible_item_label")
            row = f"{name} {label}" if label is not None else name
            self.checks.extend(_rows(host, row, item))


def _rows(host: str, name: str, item: dict[str, Any]) -> list[CheckRow]:
    """The verify table's rows for one result: its parts where the module reports them
    (prometheus_verify's targets and metrics, inference_smoke's steps), else one row."""
    status = "skipped" if item.get("skipped") else "failed" if item.get("failed") else "passed"
    detail = " ".join(_message(item).split()) if item.get("msg") else ""
    args = (item.get("invocation") or {}).get("module_args") or {}

    def verdict(ok: bool) -> str:
        return "passed" if ok else "failed"

    if isinstance(item.get("targets"), list) and isinstance(item.get("metrics"), list):  # prometheus_verify
        where = f"{args.get('url', 'Prometheus')} job {item.get('job', args.get('job', ''))}"
        rows = [
            CheckRow(host, f"{name}: target {t['instance']}", verdict(t["health"] == "up"),
                     t["health"] + (f": {t['last_error']}" if t.get("last_error") else ""),
                     f"{where} {t['scrape_url']}")
            for t in item["targets"]
        ]  # fmt: skip
        rows += [
            CheckRow(host, f"{name}: {m['metric']}", verdict(m["status"] in ("ok", "unsupported")),
                     m["status"] + (f" ({m['detail']})" if m.get("detail") else "")
                     + (f" on {', '.join(m['instances'])}" if m.get("instances") else ""), where)
            for m in item["metrics"]
        ]  # fmt: skip
        if status == "failed" and not any(r.status == "failed" for r in rows):
            rows.append(CheckRow(host, name, status, detail, where))
        return rows
    if isinstance(item.get("checks"), list) and item.get("url"):  # inference_smoke
        rows = [
            CheckRow(host, f"{name}: {c['name']}", verdict(c["ok"]), c["detail"], item["url"]) for c in item["checks"]
        ]
        if status == "failed" and not any(r.status == "failed" for r in rows):
            rows.append(CheckRow(host, name, status, detail, item["url"]))
        return rows
    if isinstance(item.get("checks"), list) and all("verdict" in c for c in item["checks"]):  # gpu_health
        # warn passes (worth a look, no reason to keep the node out); skip says why.
        verdicts = {"pass": "passed", "warn": "passed", "fail": "failed", "skip": "skipped"}
        return [
            CheckRow(host, f"{name}: {c['name']}", verdicts[c["verdict"]],
                     ("warning: " if c["verdict"] == "warn" else "") + c["evidence"], host)
            for c in item["checks"]
        ]  # fmt: skip
    return [CheckRow(host, name, status, detail, str(args.get("url") or host))]


def _new_private_dir(check: bool) -> Path:
    # One private data dir per run: ansible-runner writes the run's settings
    # (cmdline, envvars) into it, and a shared one would hand them to the next run.
    ident = time.strftime("%Y%m%dT%H%M%S") + ("-check" if check else "")
    private: Path = RUNS_DIR / ident
    suffix = 1
    while private.exists():
        private = RUNS_DIR / f"{ident}.{suffix}"
        suffix += 1
    private.mkdir(parents=True)
    return private


def ansible_env() -> dict[str, str]:
    return {
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        # ansible-playbook from the same environment as this CLI, even when it is not activated.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }


def inventory_vars(inventory: Path, host: str = "localhost") -> dict[str, Any]:
    """A host's variables as a play would see them (group_vars, host_vars; templates left unrendered)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory)])
    found = manager.get_host(host)
    if found is None:
        return {}
    return dict(VariableManager(loader=loader, inventory=manager).get_vars(host=found, include_hostvars=False))


def bench_target(variables: dict[str, Any]) -> tuple[str, str, str | None] | None:
    """The endpoint to benchmark, from an inventory's variables (inventory_vars): the first OpenAI-style
    gpufleet_inference_endpoints entry, as (url, model, api_key or None)."""
    for endpoint in variables.get("gpufleet_inference_endpoints") or []:
        if endpoint.get("kind", "openai") == "openai":
            return str(endpoint["url"]), str(endpoint["model"]), endpoint.get("api_key")
    return None


def site_playbook(variables: dict[str, Any]) -> str:
    """The playbook `gpufleet up` and `plan` run on an inventory: site.yml, or the one its
    gpufleet_site_playbook names (relative to the checkout; the built-in lab's is lab/site.yml).
    Raises ValueError, naming the variable, for a path outside the checkout or missing."""
    value = variables.get("gpufleet_site_playbook", "site.yml")
    path = (REPO_ROOT / str(value)).resolve()
    if not isinstance(value, str) or not path.is_relative_to(REPO_ROOT) or not path.is_file():
        raise ValueError(f"gpufleet_site_playbook={value!r}: not a playbook in {REPO_ROOT}")
    return value


def inventory_prometheus_url(variables: dict[str, Any]) -> str | None:
    """The main cluster's Prometheus an inventory's variables name (gpufleet_prometheus_url), when it is
    a plain URL rather than a template only a play can resolve."""
    value = variables.get("gpufleet_prometheus_url")
    return value if isinstance(value, str) and value.startswith(("http://", "https://")) else None


def planned_tasks(playbook: str, inventory: Path, limit: str | None = None, tags: str | None = None) -> dict[str, int]:
    """Tasks per host as listed statically (--list-hosts --list-tasks): the progress display's totals.

    Dynamic includes and handlers are not listed, so the figure is a floor, not a promise."""
    private = _new_private_dir(False)
    cmdline = " ".join(filter(None, ["--list-hosts --list-tasks", f"--tags {tags}" if tags else ""]))
    import ansible_runner  # here, not at the top: `gpufleet bench` runs without it (on a GPU host)

    result = ansible_runner.run(
        private_data_dir=str(private), project_dir=str(REPO_ROOT), playbook=str(REPO_ROOT / playbook),
        inventory=str(inventory.resolve()), ident="list", limit=limit, cmdline=cmdline, quiet=True,
        envvars=ansible_env(),
    )  # fmt: skip
    totals: dict[str, int] = {}
    if result.rc != 0:
        return totals
    hosts: list[str] = []
    section = ""
    for line in result.stdout.read().splitlines():
        text = line.strip()
        if text.startswith("play #"):
            hosts, section = [], ""
        elif re.match(r"hosts \(\d+\):", text):
            section = "hosts"
        elif text == "tasks:":
            section = "tasks"
        elif text and section == "hosts":
            hosts.append(text)
        elif text and section == "tasks":
            for host in hosts:
                totals[host] = totals.get(host, 0) + 1
    return totals


def run_playbook(
    playbook: str,
    inventory: Path,
    limit: str | None = None,
    tags: str | None = None,
    check: bool = False,
    quiet: bool = False,
    on_event: Callable[[Event], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    extravars: dict[str, Any] | None = None,
) -> Summary:
    private = _new_private_dir(check)
    tracker = Tracker()

    def handle(event: Event) -> bool:
        tracker(event)
        if on_event:
            on_event(event)
        return True

    cmdline = " ".join(filter(None, ["--check --diff" if check else "", f"--tags {tags}" if tags else ""]))
    started = time.monotonic()
    import ansible_runner

    result = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO_ROOT),
        playbook=str(REPO_ROOT / playbook),
        inventory=str(inventory.resolve()),
        ident="run",
        limit=limit,
        cmdline=cmdline or None,
        event_handler=handle,
        cancel_callback=cancel,
        quiet=quiet,
        envvars=ansible_env(),
        extravars=extravars,
    )
    stats = result.stats or {}
    hosts: dict[str, dict[str, int]] = {}
    for key in ("ok", "changed", "failures", "dark", "skipped"):
        for host, count in (stats.get(key) or {}).items():
            hosts.setdefault(host, {})[key] = count
    run_dir = private / "artifacts" / "run"
    cancelled = result.status == "canceled"
    summary = Summary(
        playbook, result.status, result.rc, str(run_dir), round(time.monotonic() - started, 1), check,
        hosts, tracker.failures, tracker.changes, tracker.running if cancelled else {},
        {h: t for h, t in tracker.finished.items() if h not in tracker.running} if cancelled else {},
        tracker.checks,
    )  # fmt: skip
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return summary


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
        width = max(len(f.host) for f in summary.failures)
        for f in summary.failures:
            kind = "UNREACHABLE" if f.unreachable else "FAILED"
            print(f"  {f.host:{width}}  {kind:11}  {f.task}: {' '.join(f.message.split())}", file=out)
    if summary.cancelled:
        print("\ncancelled: nothing more was started.", file=out)
        for host, task in sorted(summary.interrupted.items()):
            print(f"  {host}: interrupted in '{task}'", file=out)
        for host, task in sorted(summary.stopped_after.items()):
            print(f"  {host}: stopped after '{task}'", file=out)
        print("  Re-run the same command: every role converges from wherever it stopped.", file=out)


def print_checks(summary: Summary, out: IO[str]) -> None:
    if not summary.checks:
        print("\nverify: no check ran", file=out)
        return
    counts = {s: sum(c.status == s for c in summary.checks) for s in ("passed", "failed", "skipped")}
    print(f"\nverify: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped", file=out)
    width = max(len(c.check) for c in summary.checks)
    for c in summary.checks:
        print(f"  {c.status.upper():7}  {c.host:10}  {c.check:{width}}  {c.target}", file=out)
        if c.detail:
            print(f"  {'':7}  {'':10}  {'':{width}}  -> {c.detail}", file=out)


def print_plan(summary: Summary, out: IO[str]) -> None:
    if not summary.changes:
        print("\nplan: nothing would change", file=out)
        return
    print("\nplan: what would change, per host and role", file=out)
    for host in sorted(summary.changes):
        for role, tasks in sorted(summary.changes[host].items()):
            print(f"  {host:16} {role or '(play)':24} {len(tasks):3} task(s): {', '.join(tasks)}", file=out)
