"""gpufleet: bootstrap GPU hosts into an inference platform and prove it works.

Commands run the collection's playbooks through ansible-runner; exit codes:
0 success, 2 usage error, 3 a host failed, 4 a host was unreachable, 5 lab error,
130 cancelled (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

import httpx

from gpufleet import calibration_server, display, report, runner
from gpufleet.lib import bench_telemetry, capacity, llm_bench

T = TypeVar("T")
EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_UNREACHABLE, EXIT_LAB, EXIT_CANCELLED = 0, 2, 3, 4, 5, 130
# Commands other packages add (the built-in lab's `gpufleet lab`, from the lab wing of a checkout):
# each entry point is a function that takes the subparsers and adds its command.
COMMAND_ENTRY_POINTS = "gpufleet.commands"


def _emit(args: argparse.Namespace, document: dict[str, Any]) -> None:
    if args.json:
        json.dump(document, sys.stdout, indent=2)
        print()


class CancelOnInterrupt:
    """Ctrl-C asks ansible-runner to cancel (its cancel callback); a second Ctrl-C aborts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self) -> bool:
        return self.requested

    def __enter__(self) -> CancelOnInterrupt:
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\ngpufleet: cancelling (Ctrl-C again to abort at once)", file=sys.stderr)


def _inventory(args: argparse.Namespace) -> Path | None:
    """-i, else ANSIBLE_INVENTORY, said aloud; never the built-in lab's without being asked for it."""
    if args.inventory is None:
        from_env = os.environ.get("ANSIBLE_INVENTORY", "").split(",")[0]
        if not from_env:
            print(f"gpufleet {args.command}: no inventory: give -i INVENTORY (the built-in lab's is"
                  " -i lab/inventory), or set ANSIBLE_INVENTORY", file=sys.stderr)  # fmt: skip
            return None
        print(f"gpufleet {args.command}: inventory {from_env} (from ANSIBLE_INVENTORY; -i chooses another)",
              file=sys.stderr)  # fmt: skip
        args.inventory = from_env
    inventory = Path(args.inventory)
    if not inventory.exists():
        print(f"gpufleet: inventory {inventory} does not exist", file=sys.stderr)
        return None
    return inventory


def _options(args: argparse.Namespace, check: bool = False) -> runner.PlaybookOptions:
    return runner.PlaybookOptions(
        limit=args.limit, tags=args.tags, skip_tags=args.skip_tags, start_at_task=args.start_at_task,
        extra_vars=tuple(args.extra_vars), vault_ids=tuple(args.vault_ids),
        vault_password_files=tuple(args.vault_password_files), ask_vault_pass=args.ask_vault_pass,
        verbosity=args.verbose, forks=args.forks, diff=args.diff, check=check or getattr(args, "check", False),
        user=args.user, private_key=args.private_key, become=args.become, become_method=args.become_method,
        become_user=args.become_user, ask_become_pass=args.ask_become_pass,
    )  # fmt: skip


def _passwords(options: runner.PlaybookOptions) -> dict[str, str]:
    """Asked here, once, without echo: ansible-runner answers ansible-playbook's prompts from memory."""
    import getpass

    labels = {"vault": "Vault password: ", "become": "BECOME password: "}
    return {ask: getpass.getpass(labels[ask]) for ask in runner.vault_prompts(options)}


def _run_playbook(
    args: argparse.Namespace, playbook: str, check: bool = False, plan: bool = False, checks: bool = False
) -> int:
    inventory = _inventory(args)
    if inventory is None:
        return EXIT_USAGE
    options = _options(args, check)
    # -v asks for ansible-playbook's own output: shown as it comes, in place of the progress display.
    live, verbose = sys.stderr.isatty() and not options.verbosity, options.verbosity > 0 and not args.json
    totals = runner.planned_tasks(playbook, inventory, options) if live else {}
    passwords = _passwords(options)
    progress = display.Progress(sys.stderr, totals, live)
    with CancelOnInterrupt() as cancel:
        summary = runner.run_playbook(
            playbook, inventory=inventory, quiet=not verbose, on_event=progress, cancel=cancel, options=options,
            passwords=passwords,
        )  # fmt: skip
    progress.finish(cancelled=summary.cancelled)
    _emit(args, summary.as_dict())
    runner.print_summary(summary, sys.stderr)
    if plan:
        runner.print_plan(summary, sys.stderr)
    if checks:
        runner.print_checks(summary, sys.stderr)
    if summary.cancelled:
        return EXIT_CANCELLED
    if summary.unreachable:
        return EXIT_UNREACHABLE
    return EXIT_OK if summary.ok else EXIT_FAILED


def _site_playbook(args: argparse.Namespace) -> str | None:
    """site.yml, or the inventory's own (gpufleet_site_playbook: the lab's adds its stand-ins)."""
    inventory = _inventory(args)
    if inventory is None:
        return None
    try:
        variables = runner.inventory_vars(inventory)
    except Exception as error:  # an AnsibleError: a vault-encrypted group_vars file, read here without its password
        print(f"gpufleet: site.yml: the inventory's gpufleet_site_playbook could not be read ({error})",
              file=sys.stderr)  # fmt: skip
        return "site.yml"
    try:
        playbook: str = runner.site_playbook(variables)
    except ValueError as error:
        print(f"gpufleet: {error}", file=sys.stderr)
        return None
    return playbook


def cmd_up(args: argparse.Namespace) -> int:
    playbook = _site_playbook(args)
    return EXIT_USAGE if playbook is None else _run_playbook(args, playbook, check=args.check)


def cmd_plan(args: argparse.Namespace) -> int:
    playbook = _site_playbook(args)
    return EXIT_USAGE if playbook is None else _run_playbook(args, playbook, check=True, plan=True)


def cmd_verify(args: argparse.Namespace) -> int:
    return _run_playbook(args, "playbooks/verify.yml", checks=True)


def _slo(text: str | None) -> dict[str, float]:
    """``--slo ttft=0.5,e2e=4`` as the BenchConfig's slo_*_s; a ValueError names what is wrong."""
    if not text:
        return {}
    found = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        key = name.strip().removesuffix("_p99")
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if key not in ("ttft", "tpot", "e2e") or not seconds > 0:
            raise ValueError(f"--slo: {item!r}: give ttft, tpot or e2e, each =seconds above 0 (e.g. ttft=0.5,e2e=4)")
        found[f"slo_{key}_s"] = seconds
    return found


def _load(args: argparse.Namespace) -> dict[str, Any]:
    """The ladder's load from the options: its mode and levels, arrivals and output lengths; a ValueError
    names the option that is wrong."""
    if args.levels and args.rates:
        raise ValueError("--levels (a closed loop of streams) and --rates (an open loop of arrivals): one, not both")
    slo = _slo(args.slo)
    search = {}
    if args.search:
        if args.levels or args.rates:
            raise ValueError(f"--search {args.search} chooses its own levels: give it without --levels or --rates")
        if not slo:
            raise ValueError(f"--search {args.search} looks for the highest level within an SLO: give --slo")
        if not 0 < args.goodput_share <= 1 or not args.search_max >= 1:
            raise ValueError("--goodput-share: a share above 0 up to 1; --search-max: 1 or more")
        search = {"search": True, "goodput_share_min": args.goodput_share, "search_max": args.search_max}
    mode = "open" if args.rates or args.search == "rate" else "closed"
    if mode == "closed":
        for option, given in (("--arrival", args.arrival != "poisson"), ("--burstiness", args.burstiness != 1.0),
                              ("--max-concurrency", args.max_concurrency != 0)):  # fmt: skip
            if given:
                raise ValueError(f"{option} shapes open-loop arrivals: give --rates with it")
    option, text = ("--rates", args.rates) if args.rates else ("--levels", args.levels or "1,5,30")
    try:
        levels: list[int | float] = [(float(x) if mode == "open" else int(x)) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{option}: {text!r} is not a comma-separated list of numbers") from None
    if any(not level > 0 for level in levels):
        raise ValueError(f"{option}: {text!r}: every level must be above 0")
    if args.arrival == "gamma" and not args.burstiness > 0:
        raise ValueError(f"--burstiness: {args.burstiness:g}, the gamma's shape must be above 0")
    if args.max_concurrency < 0 or args.max_tokens_stddev < 0:
        raise ValueError("--max-concurrency and --max-tokens-stddev: 0 or more")
    if not 1 <= args.repeats <= 10:
        raise ValueError(f"--repeats: {args.repeats}, from 1 to 10 runs of each level")
    return {
        **slo, **search, "mode": mode, "levels": levels, "arrival": args.arrival, "burstiness": args.burstiness,
        "max_concurrency": args.max_concurrency, "max_tokens_stddev": args.max_tokens_stddev, "repeats": args.repeats,
    }  # fmt: skip


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        load = _load(args)
    except ValueError as exc:
        print(f"gpufleet bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    server = None
    url, model = args.url, args.model
    # A key from the environment, never from the command line (where `ps` shows it).
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.calibration:
        server, url = calibration_server.launch(args.calibration_port, "--ttft", "0.1", "--itl", "0.02")
        model = "calibration"
        print("gpufleet bench: target is the CALIBRATION SERVER, a scripted stand-in for vLLM (TTFT 100 ms,"
              " ITL 20 ms): the figures measure the client and the method, not a GPU", file=sys.stderr)  # fmt: skip
    elif not (url and model) and args.inventory:
        variables = runner.inventory_vars(Path(args.inventory))  # read once, for the target and Prometheus
        target = runner.bench_target(variables)
        if target is None:
            print(f"gpufleet bench: {args.inventory} lists no OpenAI endpoint in gpufleet_inference_endpoints",
                  file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
        url, model, api_key = url or target[0], model or target[1], api_key or target[2]
        # The GPU and server figures from the Prometheus the inventory names, as `verify` reads it.
        args.prometheus_url = args.prometheus_url or runner.inventory_prometheus_url(variables)
    if not url or not model:
        print("gpufleet bench: give --url and --model, -i INVENTORY, or --calibration", file=sys.stderr)
        return EXIT_USAGE
    if args.server != "none" and not args.prometheus_url:
        print(
            f"gpufleet bench: --server {args.server} reads the server's figures from --prometheus-url", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        prompts = _prompts(args)
        kserve_inputs = _kserve_inputs(args)
    except (OSError, ValueError) as exc:
        print(f"gpufleet bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    cfg = llm_bench.BenchConfig(
        base_url=url, model=model, api=args.api, warmup_s=args.warmup, duration_s=args.duration, **load,
        max_tokens=args.max_tokens, p99_slo_s=args.p99_slo, workers=args.workers, fixed_length=args.fixed_length,
        max_error_rate=args.max_error_rate, seed=args.seed, api_key=api_key, kserve_inputs=kserve_inputs, **prompts,
    )  # fmt: skip
    gpu = _gpu(args)
    servers = {"vllm": bench_telemetry.VllmServer, "triton": bench_telemetry.TritonServer}
    server_figures = servers[args.server](args.prometheus_url, args.server_selector) if args.server in servers else None
    if args.gpu != "none" and gpu is None:
        print(f"gpufleet bench: no GPU figures from --gpu {args.gpu}: no Prometheus URL, and NVML finds no GPU here",
              file=sys.stderr)  # fmt: skip
    try:
        result = llm_bench.run_benchmark(cfg, gpu, server_figures).as_dict()
    finally:
        if server:
            server.terminate()
        if isinstance(gpu, bench_telemetry.NvmlGpu):
            gpu.close()
    out_dir = Path(args.out or runner.RUNS_DIR / "bench" / time.strftime("%Y%m%dT%H%M%S"))
    title = f"gpufleet bench: {model} at {url}" + (" (calibration stand-in)" if args.calibration else "")
    json_path, html_path = report.write_reports(result, out_dir, title)
    _emit(args, result)
    print(report.ladder_table(result), file=sys.stderr)
    print(f"report: {html_path} (data: {json_path})", file=sys.stderr)
    cold_start = _cold_start(args.workload, args.kubeconfig) if args.workload else None
    measured = capacity.from_benchmark(result, _engine(url, args.api, api_key), _gpu_name(result), cold_start)
    if load["mode"] == "open" and not load.get("search"):
        print("capacity: an open-loop ladder measures rates, not the streams a replica holds: no capacity file"
              " (a closed-loop ladder or the SLO capacity search, --search, writes it)", file=sys.stderr)  # fmt: skip
    elif measured is None:
        print("capacity: no level was recommended, so no capacity file (the roles keep their defaults)",
              file=sys.stderr)  # fmt: skip
    else:
        capacity_path = out_dir / "capacity.json"
        capacity_path.write_text(json.dumps(measured, indent=2) + "\n")
        replica = measured["replica"]
        print(f"capacity: one replica serves {replica['streams']} streams (E2E P99 {replica['e2e_p99_s']:.2f} s):"
              f" {capacity_path} (vllm_capacity_file, triton_capacity_file)", file=sys.stderr)  # fmt: skip
    errors = sum(sum(level["errors"].values()) for level in result["levels"])
    return EXIT_FAILED if errors and args.fail_on_errors else EXIT_OK


def _engine(url: str, api: str, api_key: str | None) -> dict[str, str | None]:
    """The engine the capacity was measured on: Triton for KServe v2, else vLLM with the version its
    /version route reports (None where it answers none, as a stand-in does not)."""
    if api == "kserve_v2":
        return {"name": "triton", "version": None}
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.get(url.rstrip("/") + "/version", headers=headers, timeout=5)
        version = answer.json().get("version") if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        version = None
    return {"name": "vllm", "version": version}


def _cold_start(workload: str, kubeconfig: str | None) -> float | None:
    """The serving Deployment's cold start (capacity.cold_start_seconds), or None where it cannot be read."""
    from kubernetes import client, config  # here: `gpufleet bench` without --workload needs no cluster

    namespace, _, name = workload.partition("/")
    try:
        api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        selector = client.AppsV1Api(api).read_namespaced_deployment(name, namespace).spec.selector.match_labels or {}
        labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=labels).items
        seconds: float | None = capacity.cold_start_seconds(api.sanitize_for_serialization(pods))
    except Exception as exc:  # a benchmark's figures are kept whatever the cluster says
        print(f"capacity: no cold start from {workload}: {exc}", file=sys.stderr)
        return None
    print(f"capacity: a replica of {workload} took {seconds} s from creation to Ready", file=sys.stderr)
    return seconds


def _gpu_name(result: dict[str, Any]) -> str | None:
    """The GPU the levels ran on, as NVML or DCGM named it."""
    for level in result["levels"]:
        names = (level.get("gpu") or {}).get("gpus") or []
        if names:
            return str(names[0])
    return None


def _prompts(args: argparse.Namespace) -> dict[str, Any]:
    """A dataset, a fixed prompt, or (the default) random prompts unique per request."""
    if args.dataset:
        return {"dataset": llm_bench.load_dataset(args.dataset)}
    if args.prompt:
        return {"prompt": args.prompt}
    low, _, high = args.input_len.partition(":")
    words = (int(low), int(high or low))
    if not 0 < words[0] <= words[1]:
        raise ValueError(f"--input-len {args.input_len}: give MIN or MIN:MAX words, 0 < MIN <= MAX")
    return {"prompt_words": words}


def _kserve_inputs(args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """The inputs every KServe v2 request carries (the model's own names, shapes and types)."""
    if args.api != "kserve_v2":
        if args.kserve_inputs:
            raise ValueError(f"--kserve-inputs is for --api kserve_v2, not --api {args.api}")
        return None
    if not args.kserve_inputs:
        example = """'[{"name": "IN", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]'"""
        raise ValueError(f"--api kserve_v2 needs --kserve-inputs, the model's inputs as KServe v2 JSON: {example}")
    text = Path(args.kserve_inputs[1:]).read_text() if args.kserve_inputs.startswith("@") else args.kserve_inputs
    try:
        inputs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--kserve-inputs is not JSON: {exc}") from None
    if not (isinstance(inputs, list) and inputs and all(isinstance(i, dict) for i in inputs)):
        raise ValueError("--kserve-inputs: a non-empty JSON list of inputs, each {name, shape, datatype, data}")
    for index, item in enumerate(inputs):
        missing = [key for key in ("name", "shape", "datatype", "data") if key not in item]
        if missing:
            raise ValueError(f"--kserve-inputs[{index}] has no {', '.join(missing)}")
    return inputs


def _gpu(args: argparse.Namespace) -> Any:
    """Prometheus (DCGM) when its URL is given, else NVML when this host has the GPU."""
    if args.gpu in ("auto", "prometheus") and args.prometheus_url:
        return bench_telemetry.PrometheusGpu(args.prometheus_url, args.gpu_selector)
    if args.gpu in ("auto", "nvml"):
        return bench_telemetry.local_gpu()
    return None


def cmd_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    data = run_dir / "benchmark.json"
    if not data.exists():
        print(f"gpufleet report: {data} does not exist", file=sys.stderr)
        return EXIT_USAGE
    result = json.loads(data.read_text())
    json_path, html_path = report.write_reports(result, run_dir, f"gpufleet bench report ({run_dir.name})")
    _emit(args, {"html": str(html_path), "data": str(json_path), "levels": len(result["levels"])})
    print(report.ladder_table(result), file=sys.stderr)
    print(f"report: {html_path}", file=sys.stderr)
    return EXIT_OK


def add_playbook_options(p: argparse.ArgumentParser, check: bool) -> None:
    """ansible-playbook's options, its names and meanings, for the commands that run a playbook."""
    p.add_argument("-i", "--inventory", help="inventory path (default: ANSIBLE_INVENTORY; the lab's only when named)")
    p.add_argument("-l", "--limit", help="further limit selected hosts to a pattern")
    p.add_argument("-t", "--tags", help="only run plays and tasks tagged with these values")
    p.add_argument("--skip-tags", help="only run plays and tasks whose tags do not match these values")
    p.add_argument("--start-at-task", metavar="TASK", help="start the playbook at the task matching this name")
    p.add_argument("-e", "--extra-vars", dest="extra_vars", action="append", default=[], metavar="VARS",
                   help="set additional variables as key=value or YAML/JSON, if filename prepend with @")  # fmt: skip
    vault = p.add_mutually_exclusive_group()
    vault.add_argument("-J", "--ask-vault-pass", "--ask-vault-password", action="store_true",
                       help="ask for the vault password (asked once, without echo, before the run)")  # fmt: skip
    vault.add_argument("--vault-password-file", "--vault-pass-file", dest="vault_password_files", action="append",
                       default=[], metavar="FILE", help="vault password file (or script)")  # fmt: skip
    p.add_argument("--vault-id", dest="vault_ids", action="append", default=[], metavar="ID",
                   help="the vault identity to use: LABEL@FILE or LABEL@prompt")  # fmt: skip
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output (-vvv for connection debugging)")
    p.add_argument("-f", "--forks", type=_positive_int, help="number of parallel processes (ansible.cfg: 16)")
    p.add_argument("-D", "--diff", action="store_true", help="show the differences in files and objects changed")
    if check:
        p.add_argument("-C", "--check", action="store_true", help="dry run: report what would change")
    p.add_argument("-u", "--user", help="connect as this user")
    p.add_argument("--private-key", "--key-file", dest="private_key", metavar="FILE", help="the SSH key to use")
    p.add_argument("-b", "--become", action="store_true", help="run operations with become")
    p.add_argument("--become-method", help="privilege escalation method to use (default: sudo)")
    p.add_argument("--become-user", help="run operations as this user (default: root)")
    p.add_argument("-K", "--ask-become-pass", "--ask-become-password", action="store_true",
                   help="ask for the privilege escalation password")  # fmt: skip


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a number of 1 or more")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpufleet", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout, the display on stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    for entry_point in entry_points(group=COMMAND_ENTRY_POINTS):
        entry_point.load()(sub)

    for name, func, help_text in (
        ("up", cmd_up, "converge site.yml (or the inventory's gpufleet_site_playbook) on an inventory"),
        ("plan", cmd_plan, "check and diff site.yml: what would change, per host and role"),
        ("verify", cmd_verify, "run the verification playbook"),
    ):
        p = sub.add_parser(name, help=help_text)
        add_playbook_options(p, check=name == "up")
        p.set_defaults(func=func)
    p_bench = sub.add_parser("bench", help="benchmark an OpenAI-compatible endpoint over a concurrency ladder")
    p_bench.add_argument("-i", "--inventory", help="take the endpoint from gpufleet_inference_endpoints")
    p_bench.add_argument(
        "--api-key-env", metavar="VAR", help="send the bearer key held in this environment variable (vLLM's API key)"
    )
    p_bench.add_argument("--url")
    p_bench.add_argument("--model")
    p_bench.add_argument("--calibration", action="store_true", help="against a local calibration server (stand-in)")
    p_bench.add_argument("--calibration-port", type=int, default=8100)
    p_bench.add_argument(
        "--api", choices=["completions", "chat", "kserve_v2"], default="chat",
        help="kserve_v2: Triton's (KServe v2) inference route, one request per inference (needs --kserve-inputs)",
    )  # fmt: skip
    p_bench.add_argument(
        "--kserve-inputs", metavar="JSON|@FILE",
        help="the inputs of each KServe v2 request, as its JSON list [{name, shape, datatype, data}] or @file",
    )  # fmt: skip
    p_bench.add_argument("--levels", help="comma-separated concurrency levels: a closed loop (default 1,5,30)")
    p_bench.add_argument(
        "--rates", help="comma-separated request rates (req/s): an open loop, arrivals whatever the server's pace"
    )
    p_bench.add_argument(
        "--arrival", choices=llm_bench.ARRIVALS, default="poisson",
        help="open loop: the gaps between arrivals (gamma: of --burstiness; constant: evenly spaced)",
    )  # fmt: skip
    p_bench.add_argument(
        "--burstiness", type=float, default=1.0,
        help="open loop, gamma arrivals: the gamma's shape (1 is Poisson, below 1 burstier, above 1 steadier)",
    )  # fmt: skip
    p_bench.add_argument(
        "--max-concurrency", type=int, default=0,
        help="open loop: at most this many requests in flight; an arrival beyond it waits (counted as queue time)",
    )  # fmt: skip
    p_bench.add_argument(
        "--max-tokens-stddev", type=float, default=0.0,
        help="output lengths drawn per request from a normal around --max-tokens with this deviation (seeded)",
    )  # fmt: skip
    p_bench.add_argument(
        "--slo", metavar="ttft=S,tpot=S,e2e=S",
        help="per-request limits in seconds (any of ttft, tpot, e2e; a _p99 suffix is allowed): each level's goodput",
    )  # fmt: skip
    p_bench.add_argument(
        "--search", choices=["streams", "rate"],
        help="instead of a ladder, the SLO capacity search: the most concurrent streams (closed loop) or the highest"
        " rate (open loop) whose goodput share stays at or above --goodput-share; writes capacity.json",
    )  # fmt: skip
    p_bench.add_argument(
        "--goodput-share", type=float, default=0.99, help="the search's share of requests within --slo"
    )
    p_bench.add_argument("--search-max", type=float, default=512, help="the highest level the search tries")
    p_bench.add_argument(
        "--repeats", type=int, default=1,
        help="runs of each level, back to back (1 to 10): each figure their mean with a 95%% interval",
    )  # fmt: skip
    p_bench.add_argument("--warmup", type=float, default=3)
    p_bench.add_argument("--duration", type=float, default=15)
    p_bench.add_argument("--max-tokens", type=int, default=64)
    p_bench.add_argument(
        "--fixed-length",
        choices=["auto", "on", "off"],
        default="auto",
        help="send vLLM's ignore_eos/min_tokens for exactly --max-tokens: auto probes the server",
    )
    p_bench.add_argument(
        "--input-len",
        default="96:160",
        help="random prompts, unique per request, of MIN[:MAX] words (about a token each)",
    )
    p_bench.add_argument("--prompt", help="one fixed prompt for every request instead")
    p_bench.add_argument("--dataset", help="prompts from a file: JSON Lines with a prompt field, or one per line")
    p_bench.add_argument("--seed", type=int, default=0)
    p_bench.add_argument("--p99-slo", type=float, help="E2E P99 limit (s) for the recommended level")
    p_bench.add_argument(
        "--max-error-rate",
        type=float,
        default=0.01,
        help="a level with more errors is invalid: never the knee or the recommendation",
    )
    p_bench.add_argument("--workers", type=int, default=1)
    p_bench.add_argument(
        "--gpu",
        choices=["auto", "nvml", "prometheus", "none"],
        default="auto",
        help="GPU figures: DCGM through --prometheus-url, or NVML on this host (auto: either)",
    )
    p_bench.add_argument("--prometheus-url")
    p_bench.add_argument("--gpu-selector", default="")
    p_bench.add_argument(
        "--server",
        choices=["vllm", "triton", "none"],
        default="none",
        help="the server's own figures (queue time; vLLM's waiting requests, KV cache, preemptions; Triton's"
        " pending requests) from --prometheus-url",
    )
    p_bench.add_argument("--server-selector", default="", help="label matchers of the server's series in Prometheus")
    p_bench.add_argument(
        "--workload", metavar="NAMESPACE/DEPLOYMENT",
        help="the Deployment serving the endpoint: its pods' cold start (created to Ready) goes into capacity.json",
    )  # fmt: skip
    p_bench.add_argument(
        "--kubeconfig", help="the kubeconfig of the cluster --workload runs in (default: the client's)"
    )
    p_bench.add_argument("--out", help="report directory (default runs/bench/<time>)")
    p_bench.add_argument("--fail-on-errors", action="store_true")
    p_bench.set_defaults(func=cmd_bench)

    p_report = sub.add_parser("report", help="re-render the report of an earlier bench run")
    p_report.add_argument("run_dir")
    p_report.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
