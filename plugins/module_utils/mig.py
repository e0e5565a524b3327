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
# Each model's GPU splits into 8 memory slices (A30: 4 compute, 4 memory); a profile takes the share
# of them its memory is of the whole (User Guide, "MIG Device Names" and the profile tables).
MEMORY_SLICES = 8
_SMALL = {"A30": (4, 4)}  # model -> (compute slices, memory slices) where not (7, 8)


def model_key(gpu_name: str) -> str:
    return gpu_name.removeprefix("NVIDIA ").strip()


def _memory_gb(profile: str) -> float:
    return float(profile.split(".", 1)[1].removesuffix("gb"))


def capacity(model: str) -> tuple[int, int]:
    """A model's (compute slices, memory slices)."""
    return _SMALL.get(model, (SLICES, MEMORY_SLICES))


def memory_slices(model: str, profile: str) -> int:
    """The memory slices a profile takes on a model: its memory over one slice's (the full profile's / N)."""
    whole = max(PROFILES[model], key=lambda p: PROFILES[model][p])
    return round(_memory_gb(profile) / (_memory_gb(whole) / capacity(model)[1]))


def _fit_problem(name: str, layout: dict[str, int], model: str) -> str | None:
    compute, memory = capacity(model)
    used = sum(PROFILES[model][p] * c for p, c in layout.items())
    if used > compute:
        return f"{name}: takes {used} compute slices, a GPU has {compute}"
    used = sum(memory_slices(model, p) * c for p, c in layout.items())
    if used > memory:
        return f"{name}: takes {used} memory slices, a GPU has {memory}"
    return None


def layout_problems(name: str, layout: object, gpu_name: str | None = None) -> list[str]:
    """What is wrong with one layout (profile -> count), for any GPU or for the named model: profiles it
    does not offer, counts that are not positive, more compute or memory slices than the GPU has."""
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
    if problems:
        return problems
    # The models the layout could be for: the named one, else each whose table has all its profiles.
    models = [model_key(gpu_name)] if gpu_name else [m for m, t in PROFILES.items() if set(layout) <= set(t)]
    fits = [problem for m in models if (problem := _fit_problem(name, layout, m))]
    if models and len(fits) == len(models):  # too big for every GPU it could be for
        problems.append(fits[0])
    elif not models:
        problems.append(f"{name}: no GPU offers all of {', '.join(layout)} together")
    return problems


def single_strategy_problems(name: str, layouts: object) -> list[str]:
    """With the operator's MIG strategy `single`, every GPU of a node is split into one profile only
    (GPU Operator docs, "MIG strategies"): a layout of several profiles needs `mixed`."""
    if not isinstance(layouts, dict):
        return []
    return [
        f"{name}.{layout_name}: {', '.join(layout)} are several profiles; the strategy single takes one profile"
        " per layout (use mixed)"
        for layout_name, layout in layouts.items()
        if isinstance(layout, dict) and len(layout) > 1
    ]


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
