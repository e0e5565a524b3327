# SPDX-License-Identifier: Apache-2.0
"""Keep rendered helm values honest against a chart version's known keys.

A chart silently ignores a key it does not know, so a value renamed between
chart releases (GPU Operator's cdi.default, for one) just stops working. Each
role records, per supported chart version, the key paths that version's
values.yaml accepts; these helpers list what the role renders outside that set.
"""

from __future__ import annotations

from typing import Any

try:  # inside Ansible (module_utils) and as the gpufleet.lib package
    from ansible_collections.gpufleet.platform.plugins.module_utils import registry_mirrors
except ImportError:  # pragma: no cover - CLI without the collection on the path
    from gpufleet.lib import registry_mirrors  # type: ignore[no-redef]


def value_paths(values: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the leaves of a values tree (lists and empty maps are leaves)."""
    if isinstance(values, dict) and values:
        paths: list[str] = []
        for key, child in values.items():
            paths.extend(value_paths(child, f"{prefix}.{key}" if prefix else str(key)))
        return paths
    return [prefix] if prefix else []


def unknown_keys(values: dict[str, Any], known: list[str]) -> list[str]:
    """Paths in values that no known key covers. A known key ending in `.*` covers a
    free-form map below it (labels, a config's data)."""
    exact = {k for k in known if not k.endswith(".*")}
    maps = tuple(k[:-1] for k in known if k.endswith(".*"))
    return sorted(p for p in value_paths(values) if p not in exact and not p.startswith(maps))


def chart_image(reference: str) -> dict[str, str]:
    """An image reference as charts take it: {registry, repository, tag, sha}, the registry read as
    container runtimes read it (registry_mirrors.split_reference)."""
    rest, _, digest = reference.partition("@sha256:")
    registry, path = registry_mirrors.split_reference(rest)
    repository, _, tag = path.rpartition(":") if ":" in path else (path, "", "")
    return {"registry": registry, "repository": repository, "tag": tag, "sha": digest}
