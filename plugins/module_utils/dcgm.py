# SPDX-License-Identifier: Apache-2.0
"""What dcgm-exporter publishes, as data: default counters, labels, blank sentinels.

One table serves three users: the dcgm_exporter role's counters file, the lab's
fixture exporter, and the Prometheus verifier's ``dcgm`` profile.
"""

from __future__ import annotations

from typing import NamedTuple


class Counter(NamedTuple):
    name: str
    kind: str  # gauge | counter | label
    help: str
    # Reported by every datacenter GPU dcgm-exporter supports. Optional fields
    # (memory temperature, NVLink, vGPU, row remapping, profiling) are absent or
    # blank on some models; a verifier must not demand them.
    required: bool
    # Profiling fields need SYS_ADMIN and dcgm-exporter >= 4.0 defaults.
    profiling: bool = False


DEFAULT_COUNTERS: tuple[Counter, ...] = (
    Counter("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", True),
    Counter("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", True),
    Counter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", False),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", True),
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", True),
    Counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", True),
    Counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", True),
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", True),
    Counter("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", True),
    Counter("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", True),
    Counter("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", True),
    Counter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", True),
    Counter("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", True),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", True),
    Counter("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", False),
    Counter(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
        False,
    ),
    Counter("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", False),
    Counter(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors", False
    ),
    Counter(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors", False
    ),
    Counter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", False),
    Counter("DCGM_FI_DRIVER_VERSION", "label", "Driver Version", False),
    Counter("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", False, True),
    Counter(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", False, True
    ),
    Counter("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active.", False, True),
    Counter("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus.", False, True),
    Counter("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus.", False, True),
)

# Labels every dcgm-exporter sample carries. The host label is `Hostname` in
# released versions and `hostname` on the exporter's master branch (#655).
IDENTITY_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
HOST_LABELS = ("Hostname", "hostname")

# DCGM's "blank" values (dcgm_structs.h): BLANK, NOT_FOUND, NOT_SUPPORTED,
# NOT_PERMISSIONED, for each value type. Prometheus stores floats, so the
# int64 ones arrive rounded to 2**63.
_INT32_BLANKS = frozenset(range(0x7FFFFFF0, 0x7FFFFFF4))
_FP64_BLANKS = frozenset(float(2**47 + i) for i in range(4))
_INT64_BLANK_FLOOR = float(0x7FFFFFFFFFFFFFF0)


def is_blank(value: float) -> bool:
    """True when a sample is DCGM's "no data / not supported" sentinel, not a reading."""
    return value >= _INT64_BLANK_FLOOR or value in _INT32_BLANKS or value in _FP64_BLANKS


def counters_csv(counters: tuple[Counter, ...] = DEFAULT_COUNTERS, profiling: bool = False) -> str:
    """dcgm-exporter's counters file format: `name, type, help` per line."""
    lines = ["# Format: DCGM FIELD, Prometheus metric type, help message"]
    lines += [f"{c.name}, {c.kind}, {c.help}" for c in counters if profiling or not c.profiling]
    return "\n".join(lines) + "\n"


def parse_counters_csv(text: str) -> list[tuple[str, str, str]]:
    """(name, type, help) rows of a dcgm-exporter counters file; comments skipped."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, kind, help_text = (part.strip() for part in line.split(",", 2))
        rows.append((name, kind, help_text))
    return rows


def required_metrics(profiling: bool = False) -> list[str]:
    return [c.name for c in DEFAULT_COUNTERS if c.required and (profiling or not c.profiling)]
