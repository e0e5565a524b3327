# SPDX-License-Identifier: Apache-2.0
"""GPUs claimed by what they are (Kubernetes' dynamic resource allocation, resource.k8s.io/v1): the
ResourceClaimTemplate a serving role's pods claim their GPUs through, the CEL selectors it carries, and
checks of the values they come from.

The attributes and capacities are those NVIDIA's DRA driver for GPUs publishes under its driver name
(the domain, gpu.nvidia.com): `productName` (nvidia-smi's name, "NVIDIA H200"), `type` ("gpu" or "mig"),
`profile` (a MIG device's, "1g.18gb") and the capacity `memory`. The lab's stand-in driver publishes the
same names for its FIXTURE H200s (lab/dra/)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.mig import PROFILES

_MIG_PROFILES = sorted({p for profiles in PROFILES.values() for p in profiles})


def cel_string(value: str) -> str:
    """A CEL string literal of ``value`` (single-quoted; backslash and quote escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def selectors(request: dict[str, Any], prefix: str) -> list[tuple[str, str]]:
    """The CEL expressions of a request, each with the variable it came from (named in the API server's
    complaint about it): memory at least, product name, MIG profile, then the raw selectors."""
    domain = request.get("domain") or "gpu.nvidia.com"
    attrs, capacity = f"device.attributes[{cel_string(domain)}]", f"device.capacity[{cel_string(domain)}]"
    found: list[tuple[str, str]] = []
    if request.get("memory_at_least"):
        memory = cel_string(str(request["memory_at_least"]))
        found.append((f"{capacity}.memory.compareTo(quantity({memory})) >= 0", f"{prefix}_memory_at_least"))
    if request.get("product_name"):
        found.append((f"{attrs}.productName == {cel_string(request['product_name'])}", f"{prefix}_product_name"))
    if request.get("mig_profile"):
        found.append((f"{attrs}.profile == {cel_string(request['mig_profile'])}", f"{prefix}_mig_profile"))
    for i, expression in enumerate(request.get("selectors") or []):
        found.append((str(expression), f"{prefix}_selectors[{i}]"))
    return found


def claim_template(request: dict[str, Any], name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The ResourceClaimTemplate of ``count`` devices of ``device_class`` that every selector admits. Its name
    ends in a hash of its spec: the API server refuses a change to a template's spec, so a changed request
    is a new template, and the pods' template change rolls them onto it (claim_template_name)."""
    exactly: dict[str, Any] = {
        "deviceClassName": request["device_class"],
        "allocationMode": "ExactCount",
        "count": int(request.get("count") or 1),
    }
    cel = [expression for expression, _ in selectors(request, "")]
    if cel:
        exactly["selectors"] = [{"cel": {"expression": expression}} for expression in cel]
    spec = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": claim_template_name(request, name), "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def claim_template_name(request: dict[str, Any], name: str) -> str:
    fields = ("device_class", "count", "domain", "memory_at_least", "product_name", "mig_profile", "selectors")
    digest = hashlib.sha256(json.dumps({k: request.get(k) for k in fields}, sort_keys=True).encode()).hexdigest()
    return f"{name}-gpu-{digest[:10]}"


def problems(request: dict[str, Any], prefix: str) -> list[str]:
    """What is wrong with a request's values together that no `check:` of one value judges (the class's and
    domain's names are checked as values; the CEL the API server compiles in the role's dry run; whether the
    DeviceClass exists the role asks the cluster)."""
    found = []
    profile = request.get("mig_profile")
    if profile and profile not in _MIG_PROFILES:
        found.append(f"{prefix}_mig_profile={profile!r} is no MIG profile (one of {', '.join(_MIG_PROFILES)})")
    raw = request.get("selectors")
    if not isinstance(raw, list):
        found.append(f"{prefix}_selectors must be a list of CEL expressions, not {type(raw).__name__}")
    else:
        found += [
            f"{prefix}_selectors[{i}] must be a non-empty CEL expression, not {expression!r}"
            for i, expression in enumerate(raw)
            if not isinstance(expression, str) or not expression.strip()
        ]
    return found


def dry_run_problems(problems_from_server: list[str], request: dict[str, Any], prefix: str) -> list[str]:
    """The API server's complaints about a claim template, each naming the variable its selector came from
    (the server names `selectors[N]`, which the user never wrote)."""
    sources = [variable for _, variable in selectors(request, prefix)]
    named = []
    for problem in problems_from_server:
        match = re.search(r"selectors\[(\d+)\]", problem)
        if match and int(match.group(1)) < len(sources):
            named.append(f"{sources[int(match.group(1))]}: {problem}")
        else:
            named.append(f"the GPU claim ({prefix}_*): {problem}")
    return named
