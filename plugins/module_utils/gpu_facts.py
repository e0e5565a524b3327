# SPDX-License-Identifier: Apache-2.0
"""Facts about a host's NVIDIA GPUs, parsed from `nvidia-smi -q -x` (stdlib only)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

NOT_AVAILABLE = ("N/A", "[N/A]", "Not Supported", "[Not Supported]", "")


class GpuFactsError(ValueError):
    pass


def _text(node: ET.Element | None, path: str) -> str | None:
    found = node.find(path) if node is not None else None
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in NOT_AVAILABLE else value


def _number(node: ET.Element, path: str) -> float | None:
    """`143771 MiB`, `700.00 W`, `33 C`: the leading number, or None when N/A."""
    value = _text(node, path)
    match = re.match(r"^-?[0-9.]+", value or "")
    return float(match.group()) if match else None


def _enabled(node: ET.Element, path: str) -> bool | None:
    value = _text(node, path)
    return None if value is None else value.lower() == "enabled"


def parse_nvidia_smi_xml(document: str) -> dict[str, Any]:
    """Driver, CUDA and per-GPU facts from `nvidia-smi -q -x` output."""
    try:
        root = ET.fromstring(document)
    except ET.ParseError as exc:
        raise GpuFactsError(f"nvidia-smi -q -x output is not XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise GpuFactsError(f"unexpected root element <{root.tag}>, expected <nvidia_smi_log>")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        memory_total = _number(gpu, "fb_memory_usage/total")
        gpus.append(
            {
                "index": int(_text(gpu, "minor_number") or index),
                "name": _text(gpu, "product_name"),
                "architecture": _text(gpu, "product_architecture"),
                "uuid": _text(gpu, "uuid"),
                "pci_bus_id": _text(gpu, "pci/pci_bus_id") or gpu.get("id"),
                "memory_total_mib": int(memory_total) if memory_total is not None else None,
                "memory_used_mib": _number(gpu, "fb_memory_usage/used"),
                "mig_mode": _text(gpu, "mig_mode/current_mig"),
                "persistence_mode": _enabled(gpu, "persistence_mode"),
                "ecc_mode": _enabled(gpu, "ecc_mode/current_ecc"),
                "power_limit_w": _number(gpu, "gpu_power_readings/current_power_limit")
                or _number(gpu, "power_readings/power_limit"),
                "temperature_c": _number(gpu, "temperature/gpu_temp"),
                "utilization_pct": _number(gpu, "utilization/gpu_util"),
                # NVSwitch systems: Completed once nvidia-fabricmanager has joined the GPU to the fabric.
                "fabric_state": _text(gpu, "fabric/state"),
                "fabric_status": _text(gpu, "fabric/status"),
            }
        )
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpu_count": len(gpus),
        "gpus": gpus,
    }


def driver_major(version: str | None) -> int | None:
    match = re.match(r"^([0-9]+)", version or "")
    return int(match.group(1)) if match else None
