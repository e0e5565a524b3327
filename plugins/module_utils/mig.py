# SPDX-License-Identifier: Apache-2.0
"""MIG layouts: the profiles each GPU model offers, checks of a layout against them, and the
mig-parted configuration the GPU Operator's MIG manager applies."""

from __future__ import annotations

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
