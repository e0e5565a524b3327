"""Run the collection's playbooks through ansible-runner and summarise the result."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from gpufleet.lib.k8s_validate import describe

# Where each run's ansible-runner folder and summary go (and bench reports): ./runs unless set.
RUNS_DIR = Path(os.environ.get("GPUFLEET_RUNS_DIR", "runs")).absolute()
CHECK_PREFIX = "Check: "
SUMMARY_FILE = "summary.json"
SUMMARY_SCHEMA = Path(__file__).parent / "run-summary.schema.json"

Event = dict[str, Any]
COLLECTION = ("gpufleet", "platform")


@functools.cache
def collection_dir() -> Path:
    """The folder of gpufleet.platform whose playbooks the CLI runs: GPUFLEET_COLLECTION_DIR when set;
    the checkout this package runs from (an editable install: galaxy.yml beside src/); else an installed
    collection, in the first of ansible's collection paths (ANSIBLE_COLLECTIONS_PATH, ansible.cfg's
    collections_path, ~/.ansible/collections) that holds one."""
    if os.environ.get("GPUFLEET_COLLECTION_DIR"):
        return Path(os.environ["GPUFLEET_COLLECTION_DIR"]).resolve()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "galaxy.yml").is_file() and (checkout / "site.yml").is_file():
        return checkout
    from ansible import constants  # here: `gpufleet bench` runs without ansible (on a GPU host)

    searched = [Path(base).expanduser() / "ansible_collections" / Path(*COLLECTION)
                for base in constants.COLLECTIONS_PATHS]  # fmt: skip
    for candidate in searched:
        if (candidate / "site.yml").is_file():
            return candidate.resolve()
    raise FileNotFoundError(
        "gpufleet.platform is not installed where ansible looks for collections ("
        + ", ".join(str(c) for c in searched)
        + "): run `ansible-galaxy collection install gpufleet.platform`, or set GPUFLEET_COLLECTION_DIR"
    )


@dataclass(frozen=True)
class PlaybookOptions:
    """ansible-playbook's own options, with its meanings, handed to ansible-runner as the command line
    (paths made absolute: ansible-runner runs the playbook from the checkout, not the caller's folder)."""

    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    start_at_task: str | None = None
    extra_vars: tuple[str, ...] = ()  # each as -e takes it: key=value, YAML/JSON, or @file
    vault_ids: tuple[str, ...] = ()
    vault_password_files: tuple[str, ...] = ()
    ask_vault_pass: bool = False
    verbosity: int = 0
    forks: int | None = None
    diff: bool = False
    check: bool = False
    user: str | None = None
    private_key: str | None = None
    become: bool = False
    become_method: str | None = None
    become_user: str | None = None
    ask_become_pass: bool = False

    def args(self) -> list[str]:
        """The ansible-playbook arguments these options stand for."""
        out: list[str] = []
        for flag, value in (("--limit", self.limit), ("--tags", self.tags), ("--skip-tags", self.skip_tags),
                            ("--start-at-task", self.start_at_task), ("--user", self.user),
                            ("--private-key", _absolute(self.private_key)), ("--become-method", self.become_method),
                            ("--become-user", self.become_user)):  # fmt: skip
            if value:
                out += [flag, value]
        if self.forks is not None:
            out += ["--forks", str(self.forks)]
        for value in self.extra_vars:
            out += ["--extra-vars", "@" + _absolute(value[1:]) if value.startswith("@") else value]
        for vault_id in self.vault_ids:
            label, source = _vault_id_parts(vault_id)
            out += ["--vault-id", vault_id if source == "prompt" else f"{label}@{_absolute(source)}".lstrip("@")]
        for path in self.vault_password_files:
            out += ["--vault-password-file", _absolute(path)]
        out += [flag for flag, on in (("--ask-vault-pass", self.ask_vault_pass), ("--become", self.become),
                                      ("--ask-become-pass", self.ask_become_pass), ("--check", self.check),
                                      ("--diff", self.diff or self.check)) if on]  # fmt: skip
        if self.verbosity:
            out.append("-" + "v" * min(self.verbosity, 4))
        return out

    def shown(self) -> list[str]:
        """The arguments as the run's summary shows them: an inline -e names its variables, never
        their values (a password may be among them); files and vault ids show as given."""
        out = self.args()
        for i, arg in enumerate(out[:-1]):
            if arg == "--extra-vars" and not out[i + 1].startswith("@"):
                out[i + 1] = "<" + ",".join(_extra_var_names(out[i + 1])) + ">"
        return out


def _vault_id_parts(vault_id: str) -> tuple[str, str]:
    """(LABEL, SOURCE) of LABEL@SOURCE or SOURCE, split as ansible's own parse_vault_id does; SOURCE is
    'prompt' or a file."""
    label, _, source = vault_id.partition("@") if "@" in vault_id else ("", "", vault_id)
    return label, source


def _absolute(path: str | None) -> str:
    return str(Path(path).expanduser().absolute()) if path else ""


def _extra_var_names(value: str) -> list[str]:
    """The names an inline -e sets: a YAML/JSON mapping's keys, or each key=value's key."""
    import yaml

    try:
        loaded = yaml.safe_load(value)
    except yaml.YAMLError:
        loaded = None
    if isinstance(loaded, dict):
        return [str(k) for k in loaded]
    return [word.split("=", 1)[0] for word in value.split() if "=" in word]


def vault_prompts(options: PlaybookOptions) -> list[str]:
    """What ansible-playbook will ask for on the terminal, given these options: 'vault' for
    --ask-vault-pass or a --vault-id LABEL@prompt, 'become' for --ask-become-pass."""
    prompted = any(_vault_id_parts(v)[1] == "prompt" for v in options.vault_ids)
    asks = ["vault"] if options.ask_vault_pass or prompted else []
    return asks + (["become"] if options.ask_become_pass else [])


# ansible-playbook's prompts (lib/ansible/cli/__init__.py: "Vault password: ", "Vault password (LABEL): ",
# "BECOME password: "), answered by ansible-runner's pexpect loop from memory, never from a file.
PROMPTS = {"vault": r"^Vault password.*:\s*$", "become": r"^BECOME password.*:\s*$"}


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
    # the ansible-playbook options the run was given, as PlaybookOptions.shown() writes them
    options: list[str] = field(default_factory=list)
    # host -> role -> the diffs of the tasks that changed (or would): {"task": ..., "diff": unified text}
    diffs: dict[str, dict[str, list[dict[str, str]]]] = field(default_factory=dict)

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
        self.diffs: dict[str, dict[str, list[dict[str, str]]]] = {}

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
                if text := render_diff(data["res"]):
                    self.diffs.setdefault(host, {}).setdefault(data.get("role", ""), []).append(
                        {"task": task, "diff": text}
                    )
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


def render_diff(result: dict[str, Any]) -> str:
    """A task result's diff (--diff) as unified text: the modules' before/after (kubernetes.core
    gives objects, template and copy give text) or a diff they prepared themselves."""
    import difflib

    import yaml

    parts = [result.get("diff")] if isinstance(result.get("diff"), dict) else result.get("diff") or []
    # A loop's items, and kubernetes.core.k8s's list of definitions (result.results), each with its own.
    inner = result["result"].get("results") or [] if isinstance(result.get("result"), dict) else []
    for item in [*(result.get("results") or []), *inner]:
        found = [item["diff"]] if isinstance(item.get("diff"), dict) else item.get("diff") or []
        obj = item.get("result") if isinstance(item.get("result"), dict) else {}
        name = describe(obj) if obj.get("kind") else ""  # the object, as k8s_validate names it
        parts += [{"before_header": name, "after_header": name, **d} if name and isinstance(d, dict) else d
                  for d in found]  # fmt: skip
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("prepared"):
            texts.append(str(part["prepared"]).rstrip("\n"))
            continue
        if "before" not in part and "after" not in part:
            continue

        def lines(value: Any) -> list[str]:
            if value is None or value == "":
                return []
            if isinstance(value, dict):
                value = _without_server_fields(value)
            text = value if isinstance(value, str) else yaml.safe_dump(value, sort_keys=True, default_flow_style=False)
            return text.splitlines()

        before, after = lines(part.get("before")), lines(part.get("after"))
        if before == after:
            continue
        texts.append("\n".join(difflib.unified_diff(
            before, after, str(part.get("before_header", "before")), str(part.get("after_header", "after")),
            lineterm="",
        )))  # fmt: skip
    return "\n".join(texts)


# What the API server keeps on an object by itself: no change of the user's, so left out of a diff.
SERVER_FIELDS = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")
SERVER_ANNOTATIONS = ("deprecated.daemonset.template.generation", "deployment.kubernetes.io/revision")


def _without_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(obj.get("metadata"), dict):
        return obj
    metadata = {k: v for k, v in obj["metadata"].items() if k not in SERVER_FIELDS}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in SERVER_ANNOTATIONS}
    metadata = {k: v for k, v in metadata.items() if k != "annotations"}
    if annotations:
        metadata["annotations"] = annotations
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": metadata}


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
    # mkdir claims the name: runs started in the same second from threads (slices) get one each.
    ident = time.strftime("%Y%m%dT%H%M%S") + ("-check" if check else "")
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    suffix = 0
    while True:
        private = RUNS_DIR / (f"{ident}.{suffix}" if suffix else ident)
        try:
            private.mkdir()
            return private
        except FileExistsError:
            suffix += 1


def ansible_env() -> dict[str, str]:
    env = {
        # ansible-playbook from the same environment as this CLI, even when it is not activated.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    # The collection's own settings (a checkout's ansible.cfg), unless the caller chose a config; an
    # installed collection has none, and ansible's usual search (./ansible.cfg, ~/.ansible.cfg) applies.
    config = collection_dir() / "ansible.cfg"
    if not os.environ.get("ANSIBLE_CONFIG") and config.is_file():
        env["ANSIBLE_CONFIG"] = str(config)
    return env


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
    gpufleet_site_playbook names (relative to the collection's folder; the built-in lab's is lab/site.yml).
    Raises ValueError, naming the variable, for a path outside that folder or missing."""
    value = variables.get("gpufleet_site_playbook", "site.yml")
    root = collection_dir()
    path = (root / str(value)).resolve()
    if not isinstance(value, str) or not path.is_relative_to(root) or not path.is_file():
        raise ValueError(f"gpufleet_site_playbook={value!r}: not a playbook in {root}")
    return value


def inventory_prometheus_url(variables: dict[str, Any]) -> str | None:
    """The main cluster's Prometheus an inventory's variables name (gpufleet_prometheus_url), when it is
    a plain URL rather than a template only a play can resolve."""
    value = variables.get("gpufleet_prometheus_url")
    return value if isinstance(value, str) and value.startswith(("http://", "https://")) else None


def planned_tasks(playbook: str, inventory: Path, options: PlaybookOptions | None = None) -> dict[str, int]:
    """Tasks per host as listed statically (--list-hosts --list-tasks): the progress display's totals.

    Dynamic includes and handlers are not listed, so the figure is a floor, not a promise."""
    options = options or PlaybookOptions()
    private = _new_private_dir(False)
    # What selects hosts and tasks; a prompt (vault, become) would wait here for an answer nobody gives.
    listing = PlaybookOptions(
        limit=options.limit, tags=options.tags, skip_tags=options.skip_tags, extra_vars=options.extra_vars,
        vault_password_files=options.vault_password_files, vault_ids=tuple(v for v in options.vault_ids
                                                                           if not v.endswith("prompt")),
    )  # fmt: skip
    cmdline = shlex.join(["--list-hosts", "--list-tasks", *listing.args()])
    import ansible_runner  # here, not at the top: `gpufleet bench` runs without it (on a GPU host)

    result = ansible_runner.run(
        private_data_dir=str(private), project_dir=str(collection_dir()), playbook=str(collection_dir() / playbook),
        inventory=str(inventory.resolve()), ident="list", cmdline=cmdline, quiet=True,
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
    options: PlaybookOptions | None = None,
    passwords: dict[str, str] | None = None,
) -> Summary:
    """Run a playbook of the checkout. limit, tags and check are shorthands for the same options;
    passwords answer ansible-playbook's prompts (PROMPTS' keys) from memory."""
    options = options or PlaybookOptions()
    options = replace(options, limit=limit or options.limit, tags=tags or options.tags, check=check or options.check)
    check = options.check
    private = _new_private_dir(check)
    tracker = Tracker()

    def handle(event: Event) -> bool:
        tracker(event)
        if on_event:
            on_event(event)
        return True

    cmdline = shlex.join(options.args())
    started = time.monotonic()
    import ansible_runner

    result = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(collection_dir()),
        playbook=str(collection_dir() / playbook),
        inventory=str(inventory.resolve()),
        ident="run",
        cmdline=cmdline or None,
        passwords={PROMPTS[key]: value for key, value in (passwords or {}).items()} or None,
        suppress_env_files=True,  # ansible-runner would write the passwords (and -e, envvars) to env/ on disk
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
        tracker.checks, options.shown(), tracker.diffs,
    )  # fmt: skip
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return summary


def print_summary(summary: Summary, out: IO[str]) -> None:
    print(f"\n{summary.playbook}: {summary.status} in {summary.seconds:.1f}s (artifacts: {summary.run_dir})", file=out)
    if summary.options:
        print(f"options: {shlex.join(summary.options)}", file=out)
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
            for shown in summary.diffs.get(host, {}).get(role, []):
                lines = shown["diff"].splitlines()
                print(f"    --- {shown['task']}", file=out)
                for line in lines[:PLAN_DIFF_LINES]:
                    print(f"    {line}", file=out)
                if len(lines) > PLAN_DIFF_LINES:
                    print(f"    ... {len(lines) - PLAN_DIFF_LINES} more line(s): the whole diff is in "
                          f"{summary.run_dir}/{SUMMARY_FILE}", file=out)  # fmt: skip


# A diff longer than this (a CRD's whole object, on a first converge) is cut on the terminal, kept whole in the summary.
PLAN_DIFF_LINES = 40
