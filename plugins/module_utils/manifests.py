# SPDX-License-Identifier: Apache-2.0
"""Kubernetes manifests as charts render them, read as Go's YAML reads them: for the collection's
filters and the lab (which starts its main cluster with a chart's CRDs)."""

from __future__ import annotations

from typing import Any

import yaml

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestLoader(_Base):  # type: ignore[misc]
    """YAML 1.1 reads a bare `=` as the 'value' type, which PyYAML (and so from_yaml_all and the
    kubernetes client) cannot construct; the Prometheus Operator's CRDs list `=` in enums.
    Go's YAML, which kubectl and helm use, reads it as the string it is."""


ManifestLoader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_yaml_str)


def manifest_objects(text: str | bytes, kind: str | None = None) -> list[dict[str, Any]]:
    """The objects of a multi-document manifest, optionally only those of one kind."""
    docs = [d for d in yaml.load_all(text, Loader=ManifestLoader) if isinstance(d, dict)]
    return [d for d in docs if kind is None or d.get("kind") == kind]
