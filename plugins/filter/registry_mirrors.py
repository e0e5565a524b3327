# SPDX-License-Identifier: Apache-2.0
"""Registry mirrors rendered per engine (see module_utils/registry_mirrors.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.platform.plugins.module_utils import registry_mirrors as rm


def _checked(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function, its MirrorError shown as a filter error (the message names the entry)."""

    def wrapper(*args: Any) -> Any:
        try:
            return function(*args)
        except rm.MirrorError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return wrapper


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "registry_mirrors_checked": _checked(rm.normalize),
            "registry_mirror_problems": rm.problems,
            "containerd_hosts_toml": _checked(rm.containerd_hosts_toml),
            "k3s_registries": _checked(rm.k3s_registries),
            "docker_registry_mirrors": _checked(rm.docker_registry_mirrors),
            "image_registry": lambda ref: rm.split_reference(ref)[0],
            "image_path": lambda ref: rm.split_reference(ref)[1],
        }
