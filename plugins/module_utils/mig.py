# SPDX-License-Identifier: Apache-2.0
"""MIG layouts: the profiles each GPU model offers, checks of a layout against them, and the
mig-parted configuration the GPU Operator's MIG manager applies."""

from __future__ import annotations

import re
from typing import Any

# Profiles `<compute slices>g.<memory>gb` each model offers, with the compute slices they take of
# the GPU's 7 (NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"; the +me media
# variants are left out). Keyed by the GPU's name as nvidia-smi reports it, without "NVIDIA ".
_A100_40 = {"1g.5gb": 1, "1g.10gb": 1, "2g.10gb": 2, "3g.20gb": 3, "4g.20gb": 4, "7g.40gb": 7}
_A100_80 = {"1g.10gb": 1, "1g.20gb": 1, "2g.20gb": 2, "3g.40gb": 3, "4g.40gb": 4, "7g.80gb": 7}
_H100_94 = {"1g.12gb": 1, "1g.24gb": 1, "2g.24gb": 2, "3g.47gb": 3, "4g.47gb": 4, "7g.94gb": 7}
_H200 = {"1g.18gb": 1, "1g.35gb": 1, "2g.35gb": 2, "3g.71gb": 3, "4g.71gb": 4, "7g.141gb": 7}
PROFILES: dict[str, dict[str, int]] = {
    "A100-SXM4-40GB": _A100_40,
    "A100-PCIE-40GB": _A100_40,
    "A100-SXM4-80GB": _A100_80,
    "A100 80GB PCIe": _A100_80,
    "A30": {"1g.6gb": 1, "2g.12gb": 2, "4g.24gb": 4},
    "H100 80GB HBM3": _A100_80,
    "H100 PCIe": _A100_80,
    "H100 NVL": _H100_94,
    "H200": _H200,
    "H200 NVL": _H200,
}
SLICES = 7


def model_key(gpu_name: str) -> str:
    return gpu_name.removeprefix("NVIDIA ").strip()


def layout_problems(name: str, layout: object, gpu_name: str | None = None) -> list[str]:
    """What is wrong with one layout (profile -> count), for any GPU or for the named model."""
    if not isinstance(layout, dict) or not layout:
        return [f"{name} must map MIG profiles to counts, e.g. {{1g.18gb: 7}}"]
    if gpu_name is not None:
        offered = PROFILES.get(model_key(gpu_name))
        if offered is None:
            return [f"{name}: {gpu_name} is not a MIG-capable GPU this collection knows ({', '.join(PROFILES)})"]
        where = f"{gpu_name} offers"
    else:
        offered = {p: s for table in PROFILES.values() for p, s in table.items()}
        where = "known profiles are"
    problems = []
    for profile, count in layout.items():
        if profile not in offered:
            problems.append(f"{name}.{profile}: not a MIG profile ({where} {', '.join(offered)})")
        elif not isinstance(count, int) or isinstance(count, bool) or count < 1:
            problems.append(f"{name}.{profile}={count!r}: the count must be a positive integer")
    if not problems:
        used = sum(offered[p] * c for p, c in layout.items())
        if used > SLICES:
            problems.append(f"{name}: takes {used} compute slices, a GPU has {SLICES}")
    return problems


def parted_config(layouts: dict[str, dict[str, int]]) -> dict[str, Any]:
    """mig-parted's config: all-disabled, and each layout on every GPU of a node that asks for it."""
    configs: dict[str, Any] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for name, layout in layouts.items():
        configs[name] = [{"devices": "all", "mig-enabled": True, "mig-devices": dict(layout)}]
    return {"version": "v1", "mig-configs": configs}


# `nvidia-smi mig -lgi`: one row per GPU instance, e.g.
#   |   0  MIG 1g.18gb         19        9          2:1     |
_GI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+\d+:\d+\s+\|\s*$")


def gpu_instances(lgi_output: str) -> dict[int, dict[str, int]]:
    """{GPU index: {profile: count}} from `nvidia-smi mig -lgi` (no rows: no instances)."""
    found: dict[int, dict[str, int]] = {}
    for match in filter(None, map(_GI_ROW.match, lgi_output.splitlines())):
        gpu, profile = int(match.group(1)), match.group(2)
        found.setdefault(gpu, {})
        found[gpu][profile] = found[gpu].get(profile, 0) + 1
    return found


def gpu_changes(
    modes: dict[int, str], instances: dict[int, dict[str, int]], layout: dict[str, int] | None
) -> dict[int, list[str]]:
    """What each GPU needs to match the layout (None: MIG disabled), as steps in order; a GPU
    already there needs none. modes: {GPU index: current MIG mode, Enabled or Disabled}."""
    changes: dict[int, list[str]] = {}
    for gpu, mode in sorted(modes.items()):
        have = instances.get(gpu, {})
        steps = []
        if layout is None:
            if have:
                steps.append("destroy instances")
            if mode != "Disabled":
                steps.append("disable MIG")
        else:
            if mode != "Enabled":
                steps.append("enable MIG")
            if have != layout:
                steps += (["destroy instances"] if have else []) + ["create " + ",".join(expand(layout))]
        if steps:
            changes[gpu] = steps
    return changes


def expand(layout: dict[str, int]) -> list[str]:
    """The profiles one by one, largest first (NVIDIA's placement packs them best that way)."""
    return [p for p in sorted(layout, key=lambda p: (-int(p.split("g.")[0]), p)) for _ in range(layout[p])]
