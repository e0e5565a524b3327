# SPDX-License-Identifier: Apache-2.0
"""What each XID asks of a fleet: one table, read by the health gate (module_utils/gpu_health.py) and by
the remediation that acts on alerts (module_utils/gpu_remediation.py).

After NVIDIA's Xid catalogue for Ampere and newer GPUs, its "Resolution Bucket (Immediate Action)"
column (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html):
- RESTART_APP and IGNORE are `none`: the application's own fault (an illegal address, a page fault, a
  stopped channel, the clean-up after one); the job that caused it is gone, the GPU is fine.
- RESET_GPU and the ECC workflows (48, 63, 64, 94, 95, 140) are `reset`: memory, NVLink, GSP and
  micro-controller faults that a GPU reset (or more, up the ladder) clears.
- RESTART_BM is `reboot`: the GPU fell off the bus (79); no reset reaches it.
A GPU that needs service (a row that could not be remapped) is `replace`; no XID alone says so, the
row remapper's alert does.
"""

from __future__ import annotations

NONE, RESET, REBOOT, REPLACE = "none", "reset", "reboot", "replace"
ACTIONS = (NONE, RESET, REBOOT, REPLACE)

XIDS: dict[int, tuple[str, str]] = {
    13: (NONE, "graphics engine exception"),
    31: (NONE, "GPU memory page fault"),
    43: (NONE, "GPU stopped processing"),
    45: (NONE, "preemptive clean-up after an earlier error"),
    48: (RESET, "double-bit ECC error"),
    56: (RESET, "display engine error"),
    57: (RESET, "error programming video memory interface"),
    58: (RESET, "unstable video memory interface"),
    61: (RESET, "internal micro-controller breakpoint"),
    62: (RESET, "internal micro-controller halt"),
    63: (RESET, "row remapping or page retirement recorded: a reset applies it"),
    64: (RESET, "row remapping or page retirement failed to record"),
    68: (RESET, "video processor exception"),
    69: (RESET, "graphics engine class error"),
    73: (RESET, "NVENC2 error"),
    74: (RESET, "NVLink error"),
    79: (REBOOT, "GPU has fallen off the bus"),
    92: (RESET, "high single-bit ECC error rate"),
    94: (RESET, "contained ECC error"),
    95: (RESET, "uncontained ECC error"),
    109: (RESET, "context switch timeout"),
    110: (RESET, "security fault"),
    119: (RESET, "GSP RPC timeout"),
    120: (RESET, "GSP error"),
    121: (RESET, "C2C link error"),
    140: (RESET, "unrecovered ECC error"),
}

# XIDs after which the node is not fit for work until something is done: the health gate fails on them.
NODE_FAULTS = frozenset(xid for xid, (action, _) in XIDS.items() if action != NONE)
