# SPDX-License-Identifier: Apache-2.0
"""Filters for Kubernetes manifests as charts render them."""

from __future__ import annotations

from typing import Any

import yaml

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _ManifestLoader(_Base):  # type: ignore[misc]
    """YAML 1.1 reads a bare `=` as the 'value' type, which PyYAML (and so from_yaml_all and the
    kubernetes client) cannot construct; the Prometheus Operator's CRDs list `=` in enums.
    Go's YAML, which kubectl and helm use, reads it as the string it is."""


_ManifestLoader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_yaml_str)


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def _bytes(quantity: str) -> int:
    text = str(quantity)
    number = text.rstrip("KMGTik")
    return int(float(number) * _UNITS[text[len(number) :]])


def k8s_memory_sum(quantities: list[str]) -> str:
    """The sum of memory quantities (e.g. a process's memory and its memory-backed /dev/shm), in Mi."""
    return f"{-(-sum(_bytes(q) for q in quantities) // 2**20)}Mi"


def k8s_manifest_objects(text: str, kind: str | None = None) -> list[dict[str, Any]]:
    """The objects of a multi-document manifest, optionally only those of one kind."""
    docs = [d for d in yaml.load_all(text, Loader=_ManifestLoader) if isinstance(d, dict)]
    return [d for d in docs if kind is None or d.get("kind") == kind]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"k8s_manifest_objects": k8s_manifest_objects, "k8s_memory_sum": k8s_memory_sum}
