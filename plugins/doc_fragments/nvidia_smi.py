# SPDX-License-Identifier: Apache-2.0
"""The option of every module that reads the GPUs through nvidia-smi."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  nvidia_smi:
    description: Path or name of nvidia-smi.
    type: str
    default: nvidia-smi
"""
