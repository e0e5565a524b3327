# SPDX-License-Identifier: Apache-2.0
"""Rendered Kubernetes objects checked before the first write: against the Kubernetes OpenAPI
schema offline (kubernetes-validate, pinned in requirements/), and by the API server's own
validation and admission in a server-side dry run where the cluster answers. The schema catches
structure (a field's type, an unknown field); only the API server knows its cross-field rules
(a toleration with operator Exists and a value passes the schema, and is refused there)."""

from __future__ import annotations

from typing import Any

# The schema the lab and the pinned k3s speak; a cluster that answers gives its own version.
DEFAULT_VERSION = "1.36.0"


def describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {where}{meta.get('name', '?')}"


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def schema_problems(objects: list[dict[str, Any]], version: str = DEFAULT_VERSION) -> tuple[list[str], list[str]]:
    """(problems, skipped): each object against the OpenAPI schema of its kind at that Kubernetes
    version, strict (unknown fields refused). Kinds without a schema there (custom resources) are
    skipped, and named."""
    try:
        import kubernetes_validate
    except ImportError as error:
        raise RuntimeError(
            "the controller lacks kubernetes-validate, which checks rendered objects against Kubernetes' schema:"
            " pip install kubernetes-validate (the version requirements/constraints.txt pins)"
        ) from error

    problems, skipped = [], []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            skipped.append(describe(obj))
        except kubernetes_validate.ValidationError as error:
            where = _path(error.path)
            problems.append(f"{describe(obj)}: {where + ': ' if where else ''}{error.message}")
    return problems, skipped


def server_version(api_client: Any) -> str:
    """The cluster's Kubernetes version as major.minor.0, to pick the schema."""
    from kubernetes import client

    info = client.VersionApi(api_client).get_code()
    minor = "".join(ch for ch in str(info.minor) if ch.isdigit())
    return f"{info.major}.{minor}.0"


def dry_run_problems(objects: list[dict[str, Any]], api_client: Any) -> tuple[list[str], list[str]]:
    """(problems, skipped): each object sent as a server-side apply with dryRun=All, so the API
    server validates and admits it and persists nothing. An object in a namespace that does not
    exist yet (a first deploy: the role creates it) cannot be dry-run, and is named as skipped."""
    from kubernetes import dynamic
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    api = dynamic.DynamicClient(api_client)  # type: ignore[no-untyped-call]
    namespaces = {o["metadata"]["name"] for o in objects if o.get("kind") == "Namespace"}
    problems, skipped = [], []
    for obj in objects:
        try:
            resource = api.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        except ResourceNotFoundError:
            problems.append(f"{describe(obj)}: the cluster serves no {obj['kind']} in {obj['apiVersion']}")
            continue
        namespace = (obj.get("metadata") or {}).get("namespace")
        if resource.namespaced and namespace and namespace not in namespaces:
            try:
                api.resources.get(api_version="v1", kind="Namespace").get(name=namespace)
            except ApiException as error:
                if error.status != 404:
                    raise
                skipped.append(f"{describe(obj)} (namespace {namespace} is created by this run)")
                continue
        try:
            resource.server_side_apply(
                body=obj, name=obj["metadata"]["name"], namespace=namespace if resource.namespaced else None,
                field_manager="gpufleet", force_conflicts=True, dry_run="All",
            )  # fmt: skip
        except ApiException as error:
            problems.append(f"{describe(obj)}: the API server refuses it: {_reason(error)}")
    return problems, skipped


def _reason(error: Any) -> str:
    import json

    try:
        body = json.loads(error.body)
    except (TypeError, ValueError):
        return str(error.reason)
    causes = [
        f"{c.get('field', '')}: {c.get('message', '')}".strip(": ") for c in body.get("details", {}).get("causes", [])
    ]
    return "; ".join(causes) or str(body.get("message") or error.reason)
