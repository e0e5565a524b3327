# SPDX-License-Identifier: Apache-2.0
"""One description of registry mirrors, rendered for each engine that reads one.

A mirror entry says which registry it stands in for and where to pull from instead:

    - registry: docker.io                        # the name images are referenced by
      endpoints: [https://mirror.internal:5000]  # tried in order, then the registry itself
      upstream: https://registry-1.docker.io     # optional: where the registry really is
      skip_verify: false                         # optional: TLS not verified (test mirrors only)
      ca_file: /etc/ssl/mirror-ca.pem            # optional: CA on the nodes for the endpoints
      project: dockerhub-proxy                   # optional: a path prefix the endpoints serve the
                                                 # registry's images under (a Harbor proxy-cache project)

Rendered as containerd's certs.d/<registry>/hosts.toml, k3s's registries.yaml and
Docker's daemon.json registry-mirrors (Docker mirrors Docker Hub only, without a project).

A Harbor proxy-cache project serves docker.io/library/busybox:1 as
https://harbor/v2/<project>/library/busybox/manifests/1. containerd gets the host URL with that
path and `override_path = true` (it then adds no /v2 itself); k3s keeps the endpoint and
rewrites every repository to <project>/<repository>.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

DOCKER_HUB = "docker.io"
_REGISTRY = re.compile(r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9-]+)*(?::[0-9]{1,5})?$")
_KEYS = {"registry", "endpoints", "upstream", "skip_verify", "ca_file", "project"}
_PROJECT = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")  # Harbor's project names


class MirrorError(ValueError):
    pass


def _url(value: object, where: str) -> str:
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise MirrorError(f"{where}: {value!r} is not an http(s)://host[:port] URL")
    return str(value).rstrip("/")


def normalize(mirrors: object, variable: str = "gpufleet_registry_mirrors") -> list[dict[str, Any]]:
    """Check a list of mirror entries; raise MirrorError naming the variable, the entry and the field."""
    if not isinstance(mirrors, list):
        raise MirrorError(f"{variable} must be a list of {{registry, endpoints}} entries")
    result = []
    for index, entry in enumerate(mirrors):
        where = f"{variable}[{index}]"
        if not isinstance(entry, dict):
            raise MirrorError(f"{where} must be a mapping with registry and endpoints")
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise MirrorError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})")
        registry = entry.get("registry")
        if not isinstance(registry, str) or not _REGISTRY.match(registry):
            raise MirrorError(f"{where}.registry: {registry!r} is not a registry host[:port] such as docker.io")
        endpoints = entry.get("endpoints")
        if not isinstance(endpoints, list) or not endpoints:
            raise MirrorError(f"{where}.endpoints: give at least one mirror URL")
        default_upstream = "https://registry-1.docker.io" if registry == DOCKER_HUB else f"https://{registry}"
        ca_file = entry.get("ca_file")
        if ca_file is not None and not str(ca_file).startswith("/"):
            raise MirrorError(f"{where}.ca_file: {ca_file!r} must be an absolute path on the nodes")
        if not isinstance(entry.get("skip_verify", False), bool):
            raise MirrorError(f"{where}.skip_verify must be true or false")
        project = entry.get("project")
        if project is not None and not (isinstance(project, str) and _PROJECT.match(project)):
            raise MirrorError(f"{where}.project: {project!r} is not a project name (lower case, digits, . _ -)")
        result.append(
            {
                "registry": registry,
                "endpoints": [_url(e, f"{where}.endpoints[{i}]") for i, e in enumerate(endpoints)],
                "upstream": _url(entry.get("upstream", default_upstream), f"{where}.upstream"),
                "skip_verify": entry.get("skip_verify", False),
                "ca_file": ca_file,
                "project": project,
            }
        )
    registries = [m["registry"] for m in result]
    duplicates = sorted({r for r in registries if registries.count(r) > 1})
    if duplicates:
        raise MirrorError(f"{variable}: {', '.join(duplicates)} listed more than once")
    return result


def problems(mirrors: object, variable: str, docker: bool = False) -> list[str]:
    """What normalize (and, for Docker, docker_registry_mirrors) would refuse, as a list: empty when the
    entries are well formed."""
    try:
        normalize(mirrors, variable)
        if docker:
            docker_registry_mirrors(mirrors, variable)
    except MirrorError as exc:
        return [str(exc)]
    return []


def split_reference(reference: str) -> tuple[str, str]:
    """(registry, repository path with tag or digest), as containerd resolves a reference:
    busybox:1.36 is docker.io's library/busybox:1.36."""
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DOCKER_HUB, reference
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return registry, path


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def containerd_hosts_toml(entry: dict[str, Any]) -> str:
    """containerd's hosts.toml for one registry (certs.d/<registry>/hosts.toml)."""
    entry = normalize([entry])[0]
    lines = ["# Managed by gpufleet: pull through the mirrors below, then the registry itself.",
             f"server = {_toml_string(entry['upstream'])}", ""]  # fmt: skip
    for endpoint in entry["endpoints"]:
        if entry["project"]:
            lines.append(f"[host.{_toml_string(endpoint + '/v2/' + entry['project'])}]")
            lines.append('  capabilities = ["pull", "resolve"]')
            lines.append("  override_path = true")
        else:
            lines.append(f"[host.{_toml_string(endpoint)}]")
            lines.append('  capabilities = ["pull", "resolve"]')
        if entry["skip_verify"]:
            lines.append("  skip_verify = true")
        if entry["ca_file"]:
            lines.append(f"  ca = {_toml_string(entry['ca_file'])}")
        lines.append("")
    return "\n".join(lines)


def k3s_registries(mirrors: object) -> dict[str, Any]:
    """k3s's registries.yaml content."""
    entries = normalize(mirrors)
    document: dict[str, Any] = {"mirrors": {}}
    for m in entries:
        mirror: dict[str, Any] = {"endpoint": m["endpoints"]}
        if m["project"]:
            mirror["rewrite"] = {"^(.*)$": f"{m['project']}/$1"}
        document["mirrors"][m["registry"]] = mirror
    configs = {}
    for m in entries:
        tls: dict[str, Any] = {}
        if m["skip_verify"]:
            tls["insecure_skip_verify"] = True
        if m["ca_file"]:
            tls["ca_file"] = m["ca_file"]
        if tls:
            for endpoint in m["endpoints"]:
                configs[urlsplit(endpoint).netloc] = {"tls": tls}
    if configs:
        document["configs"] = configs
    return document


def docker_registry_mirrors(mirrors: object, variable: str = "gpufleet_registry_mirrors") -> list[str]:
    """Docker's daemon.json registry-mirrors: Docker consults mirrors for Docker Hub only."""
    entries = normalize(mirrors, variable)
    for index, m in enumerate(entries):
        if m["registry"] == DOCKER_HUB and m["project"]:
            raise MirrorError(
                f"{variable}[{index}].project: Docker's registry-mirrors cannot add a path prefix;"
                " point Docker at a mirror that serves Docker Hub at its root, or leave docker out of the engines"
            )
    return [e for m in entries if m["registry"] == DOCKER_HUB for e in m["endpoints"]]
