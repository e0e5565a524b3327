"""`gpufleet lab`: the built-in lab's command, added to the product's CLI through the
`gpufleet.commands` entry point (lab/pyproject.toml) so that the product knows nothing of the lab."""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import gpufleet_lab as lab
from gpufleet_lab import containers as labcontainers
from gpufleet_lab import hosts as labhosts
from gpufleet_lab import image as labimage
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from gpufleet_lab import prerequisites as labprerequisites
from gpufleet_lab import registry as labregistry

T = TypeVar("T")
EXIT_OK, EXIT_LAB = 0, 5  # gpufleet.cli's codes
GO_TOOLS_BUILD = lab.LAB_ROOT / "scripts" / "build-lab-k8s.sh"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `gpufleet lab` to the product CLI's subcommands."""
    p_lab = sub.add_parser("lab", help="the built-in lab: two clusters and their nodes, podman systemd hosts")
    # build: the images and Go tools only (a fresh machine's minutes), for a run that starts later.
    p_lab.add_argument("action", choices=["build", "up", "down", "status"])
    p_lab.add_argument("--hosts", type=int, help="plain GPU-node hosts for a scale lab (gpu1..gpuN plus m1)")
    # Implied by the lab inventory, whose hosts are the clusters' nodes.
    p_lab.add_argument("--k8s", action="store_true", help="also the two clusters (built once)")
    p_lab.set_defaults(func=cmd_lab)


def cmd_lab(args: argparse.Namespace) -> int:
    try:
        return _lab(args)
    except lab.LabError as exc:
        print(f"gpufleet lab: {exc}", file=sys.stderr)
        return EXIT_LAB


def _while_go_tools_build(args: argparse.Namespace, work: Callable[[], T]) -> T:
    """Run `work` while lab/scripts/build-lab-k8s.sh builds the lab's Go tools (a no-op once built; on a
    fresh machine both take minutes: the build the CPU, the work the network). A failure of either
    stops the other."""
    build = subprocess.Popen([str(GO_TOOLS_BUILD)], start_new_session=True,
                             stdout=sys.stderr if args.json else None)  # fmt: skip
    try:
        result = work()
    except BaseException:
        os.killpg(build.pid, signal.SIGTERM)  # the script and its go builds
        raise
    if build.wait() != 0:
        raise subprocess.CalledProcessError(build.returncode, build.args)
    return result


def _lab(args: argparse.Namespace) -> int:
    inventory = labinventory.scale_inventory(args.hosts) if args.hosts else lab.LAB_INVENTORY
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout)
    doc: dict[str, Any] = {"action": args.action}
    if args.action == "build":
        started = time.monotonic()
        labprerequisites.check_prerequisites()  # a missing one is named before anything starts

        # What needs the network (debootstrap, Debian's docker-registry) beside what needs the CPU.
        def images_from_the_network() -> None:
            labimage.ensure_image()
            labregistry.ensure_image()

        _while_go_tools_build(args, images_from_the_network)
        images = labnodes.build_images(labk8s.bin_dir())
        doc.update(tools=str(labk8s.bin_dir()), images=sorted(images), seconds=round(time.monotonic() - started, 1))
        say(f"lab built in {doc['seconds']:.1f}s: tools in {doc['tools']}, {len(images)} images; nothing started")
    elif args.action == "up":
        started = time.monotonic()
        _, real_nodes = labinventory.split_hosts(inventory)
        labprerequisites.check_prerequisites()  # a missing one is named before anything starts
        # The inventory's hosts are the clusters' nodes: they come with the clusters, whose tools are
        # built while the hosts start.
        k8s = bool(args.k8s or real_nodes)
        hosts = _while_go_tools_build(args, lambda: labhosts.up(inventory)) if k8s else labhosts.up(inventory)
        doc.update(hosts={h.name: h.address for h in [*hosts, *real_nodes]}, inventory=str(inventory.parent),
                   seconds=round(time.monotonic() - started, 1))  # fmt: skip
        if hosts:
            say(f"lab up in {doc['seconds']:.1f}s: " + ", ".join(f"{h.name} ({h.address})" for h in hosts))
        say(f"inventory: {inventory.parent}")
        if k8s:
            started = time.monotonic()
            labk8s.up()
            doc["kubeconfigs"] = {name: str(labk8s.kubeconfig_path(name)) for name in labk8s.CLUSTERS}
            say(f"clusters v{labk8s.K8S_VERSION} up in {time.monotonic() - started:.1f}s: "
                + ", ".join(f"{name} {path}" for name, path in doc["kubeconfigs"].items()))  # fmt: skip
    elif args.action == "down":
        stopped = labk8s.down()
        removed = labhosts.down()
        doc.update(containers=removed, k8s_processes=stopped)
        say(f"lab down: removed {len(removed)} container(s), network {lab.NETWORK}, {len(stopped)} k8s process(es)")
    else:
        states = {
            name.removeprefix(lab.CONTAINER_PREFIX): state for name, state in labcontainers.running_hosts().items()
        }
        doc.update(hosts=states, k8s=labk8s.status())
        for name, state in sorted(states.items()):
            say(f"{name:10} {state}")
        if not states:
            say("lab hosts are down")
        for name, running in doc["k8s"].items():
            say(f"{name:24} {'running' if running else 'stopped'}")
    _emit(args, doc)
    return EXIT_OK


def _emit(args: argparse.Namespace, document: dict[str, Any]) -> None:
    if args.json:
        json.dump(document, sys.stdout, indent=2)
        print()
