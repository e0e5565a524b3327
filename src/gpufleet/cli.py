"""gpufleet: bootstrap GPU hosts into an inference platform and prove it works.

Commands run the collection's playbooks through ansible-runner; exit codes:
0 success, 2 usage error, 3 a host failed, 4 a host was unreachable, 5 lab error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gpufleet import lab, runner

EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_UNREACHABLE, EXIT_LAB = 0, 2, 3, 4, 5


def cmd_lab(args: argparse.Namespace) -> int:
    inventory = lab.scale_inventory(args.hosts) if args.hosts else lab.LAB_INVENTORY
    if args.action == "up":
        started = time.monotonic()
        hosts = lab.up(inventory)
        print(f"lab up in {time.monotonic() - started:.1f}s: " + ", ".join(f"{h.name} ({h.address})" for h in hosts))
        print(f"inventory: {inventory.parent}")
    elif args.action == "down":
        removed = lab.down()
        print(f"lab down: removed {len(removed)} container(s) and network {lab.NETWORK}")
    else:
        states = lab.running_hosts()
        for name, state in sorted(states.items()):
            print(f"{name.removeprefix(lab.CONTAINER_PREFIX):10} {state}")
        if not states:
            print("lab is down")
    return EXIT_OK


def _run_playbook(args: argparse.Namespace, playbook: str) -> int:
    inventory = Path(args.inventory)
    if not inventory.exists():
        print(f"gpufleet: inventory {inventory} does not exist", file=sys.stderr)
        return EXIT_USAGE
    summary = runner.run_playbook(
        playbook,
        inventory=inventory,
        limit=getattr(args, "limit", None),
        tags=getattr(args, "tags", None),
        check=getattr(args, "check", False),
        quiet=args.json,
    )
    if args.json:
        json.dump(summary.as_dict(), sys.stdout, indent=2)
        print()
    else:
        runner.print_summary(summary, sys.stderr)
    if summary.unreachable:
        return EXIT_UNREACHABLE
    return EXIT_OK if summary.ok else EXIT_FAILED


def cmd_up(args: argparse.Namespace) -> int:
    return _run_playbook(args, "site.yml")


def cmd_verify(args: argparse.Namespace) -> int:
    return _run_playbook(args, "playbooks/verify.yml")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpufleet", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout, the display on stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    p_lab = sub.add_parser("lab", help="the built-in lab of podman systemd hosts")
    p_lab.add_argument("action", choices=["up", "down", "status"])
    p_lab.add_argument("--hosts", type=int, help="GPU-node hosts for a scale lab (gpu1..gpuN plus m1)")
    p_lab.set_defaults(func=cmd_lab)

    for name, func, help_text in (
        ("up", cmd_up, "converge site.yml on an inventory"),
        ("verify", cmd_verify, "run the verification playbook"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("-i", "--inventory", default=str(lab.LAB_INVENTORY.parent))
        p.add_argument("--limit")
        p.add_argument("--tags")
        if name == "up":
            p.add_argument("--check", action="store_true", help="dry run: report what would change")
        p.set_defaults(func=func)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except lab.LabError as exc:
        print(f"gpufleet lab: {exc}", file=sys.stderr)
        return EXIT_LAB
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
