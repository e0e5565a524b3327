# SPDX-License-Identifier: Apache-2.0
"""The health gate of a GPU node: named checks, each with a verdict and its evidence.

Inputs are what the node itself reports: `nvidia-smi -q -x`, the kernel log since boot (XID
lines), the count of NVSwitches on the PCI bus and, where DCGM is installed, `dcgmi diag -r 1 -j`.
A verdict is pass, warn (worth a look, not a reason to keep the node out), fail or skip (the input
was not there; the evidence says why). Stdlib only: it runs on the node.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.gpu_facts import GpuFactsError, _text
from ansible_collections.gpufleet.platform.plugins.module_utils.xid import NODE_FAULTS

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"

# XIDs after which the node needs a reset or more (module_utils/xid.py, after NVIDIA's catalogue); others
# (13, 31, 43, 45: faults of an application or its exit) are warnings: the job that caused them is gone after a drain.
XID_NODE_FAULTS = NODE_FAULTS
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)")

# clocks_event_reasons (throttle_reasons before driver 535) that mean the hardware protects
# itself; sw_power_cap is the power limit at work under load, a warning.
THROTTLE_FAULTS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


def check(name: str, verdict: str, evidence: str) -> dict[str, str]:
    return {"name": name, "verdict": verdict, "evidence": evidence}


def _int(value: str | None) -> int | None:
    match = re.match(r"^\d+", value or "")
    return int(match.group()) if match else None


def _gpu_label(gpu: ET.Element, index: int) -> str:
    return f"GPU {_text(gpu, 'minor_number') or index} ({_text(gpu, 'pci/pci_bus_id') or gpu.get('id')})"


def xid_check(kernel_log: str | None) -> dict[str, str]:
    if kernel_log is None:
        return check("xid_errors", SKIP, "the kernel log could not be read (journalctl -k and dmesg both failed)")
    events = [m.groups() for m in map(_XID.search, kernel_log.splitlines()) if m]
    if not events:
        return check("xid_errors", PASS, "no NVRM Xid line in the kernel log since boot")
    faults = sorted({int(x) for _, x, _ in events if int(x) in XID_NODE_FAULTS})
    first = "; ".join(f"{pci} Xid {xid}: {text.strip()[:120]}" for pci, xid, text in events[:3])
    verdict = FAIL if faults else WARN
    why = f"node-level XIDs {faults}" if faults else "application XIDs only"
    return check("xid_errors", verdict, f"{len(events)} Xid event(s) since boot, {why}: {first}")


def _per_gpu(name: str, root: ET.Element, judge: Callable[[ET.Element], tuple[str, str]]) -> dict[str, str]:
    """One check over every GPU: the worst verdict, with each GPU's evidence."""
    order = {PASS: 0, SKIP: 1, WARN: 2, FAIL: 3}
    verdicts, notes = [], []
    for index, gpu in enumerate(root.findall("gpu")):
        verdict, evidence = judge(gpu)
        verdicts.append(verdict)
        notes.append(f"{_gpu_label(gpu, index)}: {evidence}")
    if not verdicts:
        return check(name, SKIP, "nvidia-smi lists no GPU")
    return check(name, max(verdicts, key=order.__getitem__), "; ".join(notes))


def _row_remap(gpu: ET.Element) -> tuple[str, str]:
    pending, failure = (
        _text(gpu, "remapped_rows/remapped_row_pending"),
        _text(gpu, "remapped_rows/remapped_row_failure"),
    )
    if pending is None and failure is None:
        return SKIP, "no row remapper (older GPU: see retired_pages)"
    unc = _int(_text(gpu, "remapped_rows/remapped_row_unc")) or 0
    evidence = f"pending={pending}, failure={failure}, uncorrectable rows remapped={unc}"
    if failure == "Yes":
        return FAIL, evidence + " - a row could not be remapped: the GPU needs service"
    if pending == "Yes":
        return FAIL, evidence + " - a remap waits for a GPU reset"
    return PASS, evidence


def _retired_pages(gpu: ET.Element) -> tuple[str, str]:
    pending = _text(gpu, "retired_pages/pending_retirement") or _text(gpu, "retired_pages/pending_blacklist")
    sbe = _int(_text(gpu, "retired_pages/multiple_single_bit_retirement/retired_count"))
    dbe = _int(_text(gpu, "retired_pages/double_bit_retirement/retired_count"))
    if pending is None and sbe is None and dbe is None:
        return PASS, "no page retirement on this GPU (row remapping replaces it)"
    evidence = f"pending={pending}, single-bit retired={sbe}, double-bit retired={dbe}"
    if pending == "Yes":
        return FAIL, evidence + " - a retirement waits for a GPU reset"
    # NVIDIA's guidance: an RMA is warranted from 60 retired pages (or 15 double-bit).
    if (sbe or 0) + (dbe or 0) >= 60 or (dbe or 0) >= 15:
        return FAIL, evidence + " - past NVIDIA's return threshold"
    return PASS, evidence


def _ecc(gpu: ET.Element) -> tuple[str, str]:
    mode = _text(gpu, "ecc_mode/current_ecc")
    if mode is None:
        return SKIP, "ECC not supported"
    fields = ("dram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded", "sram_uncorrectable",
              "double_bit/total")  # fmt: skip
    volatile = sum(_int(_text(gpu, f"ecc_errors/volatile/{f}")) or 0 for f in fields)
    unrepairable = _text(gpu, "ecc_errors/unrepairable_memory")
    evidence = f"ECC {mode}, volatile uncorrectable={volatile}, unrepairable memory={unrepairable}"
    if volatile > 0 or unrepairable == "Yes":
        return FAIL, evidence
    if mode != "Enabled":
        return WARN, evidence + " - memory errors go undetected with ECC off"
    return PASS, evidence


def _pcie(gpu: ET.Element) -> tuple[str, str]:
    link = "pci/pci_gpu_link_info"
    width = _int(_text(gpu, f"{link}/link_widths/current_link_width"))
    width_max = _int(_text(gpu, f"{link}/link_widths/max_link_width"))
    gen = _int(_text(gpu, f"{link}/pcie_gen/current_link_gen"))
    gen_max = _int(_text(gpu, f"{link}/pcie_gen/max_link_gen"))
    if None in (width, width_max, gen, gen_max):
        return SKIP, "link width or generation not reported"
    evidence = f"x{width} of x{width_max}, gen {gen} of {gen_max}"
    if width < width_max:  # type: ignore[operator]
        return FAIL, evidence + " - the link trained narrow (a seating or riser fault)"
    if gen < gen_max:  # type: ignore[operator]
        # An idle GPU lowers its link generation to save power; under load it is a fault.
        idle = (
            _text(gpu, "clocks_event_reasons/clocks_event_reason_gpu_idle") == "Active"
            or _text(gpu, "clocks_throttle_reasons/clocks_throttle_reason_gpu_idle") == "Active"
        )
        return (WARN, evidence + " while idle (power saving)") if idle else (FAIL, evidence + " under load")
    return PASS, evidence


def _persistence(gpu: ET.Element) -> tuple[str, str]:
    mode = _text(gpu, "persistence_mode")
    if mode is None:
        return SKIP, "persistence mode not reported"
    if mode != "Enabled":
        return FAIL, f"persistence mode {mode}: start nvidia-persistenced, or each job pays the driver's init"
    return PASS, "persistence mode Enabled"


def _throttle(gpu: ET.Element) -> tuple[str, str]:
    node = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if node is None:
        node, prefix = gpu.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    if node is None:
        return SKIP, "throttle reasons not reported"
    active = [child.tag.removeprefix(prefix) for child in node if (child.text or "").strip() == "Active"]
    faults = [r for r in active if r in THROTTLE_FAULTS]
    evidence = "active: " + (", ".join(active) or "none")
    if faults:
        return FAIL, evidence
    if "sw_power_cap" in active:
        return WARN, evidence + " (the power limit holds the clocks down)"
    return PASS, evidence


def fabric_check(root: ET.Element, nvswitches: int) -> dict[str, str]:
    """On NVSwitch systems (HGX) every GPU's fabric must be Completed/Success; without NVSwitches
    the fabric is N/A and there is nothing to check."""
    if nvswitches == 0:
        return check("fabric", PASS, "no NVSwitch on the PCI bus: no fabric to join")

    def judge(gpu: ET.Element) -> tuple[str, str]:
        state, status = _text(gpu, "fabric/state"), _text(gpu, "fabric/status")
        evidence = f"fabric state={state}, status={status}"
        ok = state == "Completed" and status in ("Success", None)
        return (
            (PASS, evidence) if ok else (FAIL, evidence + " - is nvidia-fabricmanager running at the driver's version?")
        )

    result = _per_gpu("fabric", root, judge)
    result["evidence"] = f"{nvswitches} NVSwitch(es); " + result["evidence"]
    return result


def dcgm_diag_check(diag_json: str | None, reason: str = "") -> dict[str, str]:
    """`dcgmi diag -r 1 -j`: every test's result; any Fail fails the check."""
    if diag_json is None:
        return check("dcgm_diag", SKIP, reason or "dcgmi is not installed")
    try:
        document = json.loads(diag_json)
    except ValueError:
        return check("dcgm_diag", FAIL, f"dcgmi diag did not return JSON: {diag_json.strip()[:200]}")
    results: list[tuple[str, str]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            name = node.get("name") or node.get("test_name")
            status = node.get("status") or node.get("result")
            if isinstance(name, str) and isinstance(status, str):
                results.append((name, status))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    failed = [f"{n}: {s}" for n, s in results if s.lower() in ("fail", "failed", "error")]
    if failed:
        return check("dcgm_diag", FAIL, "; ".join(failed))
    if not results:
        return check("dcgm_diag", WARN, "dcgmi diag returned no test results")
    return check("dcgm_diag", PASS, f"{len(results)} test(s): " + ", ".join(f"{n} {s}" for n, s in results[:8]))


def evaluate(
    nvidia_smi_xml: str,
    kernel_log: str | None,
    nvswitches: int = 0,
    dcgm_diag_json: str | None = None,
    dcgm_reason: str = "",
) -> list[dict[str, str]]:
    try:
        root = ET.fromstring(nvidia_smi_xml)
    except ET.ParseError as exc:
        raise GpuFactsError(f"nvidia-smi -q -x output is not XML: {exc}") from exc
    return [
        xid_check(kernel_log),
        _per_gpu("row_remapping", root, _row_remap),
        _per_gpu("retired_pages", root, _retired_pages),
        _per_gpu("ecc_uncorrectable", root, _ecc),
        _per_gpu("pcie_link", root, _pcie),
        _per_gpu("persistence_mode", root, _persistence),
        _per_gpu("throttle_reasons", root, _throttle),
        fabric_check(root, nvswitches),
        dcgm_diag_check(dcgm_diag_json, dcgm_reason),
    ]


def count_nvswitches(pci_listing: dict[str, tuple[str, str]]) -> int:
    """NVSwitches among PCI devices given as {slot: (vendor, class)}: NVIDIA's (0x10de) bridge
    devices of class 0x0680 ("other bridge")."""
    return sum(
        1 for vendor, cls in pci_listing.values() if vendor.lower() == "0x10de" and cls.lower().startswith("0x0680")
    )


def pci_listing(directory: str) -> dict[str, tuple[str, str]]:
    """{slot: (vendor, class)} of the PCI devices listed under directory (/sys/bus/pci/devices)."""
    listing = {}
    for slot in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        try:
            with (
                open(os.path.join(directory, slot, "vendor")) as vendor,
                open(os.path.join(directory, slot, "class")) as cls,
            ):
                listing[slot] = (vendor.read().strip(), cls.read().strip())
        except OSError:
            continue
    return listing
