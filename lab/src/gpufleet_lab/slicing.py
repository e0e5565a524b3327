"""AWX's job slicing, reproduced on a lab inventory, for the test that runs the node stage sliced.

AWX (awx/main/models/inventory.py, Inventory.get_script_data and get_sliced_hosts) gives slice k of n
the inventory's hosts ordered by name, every n-th from the k-th, and each group only its hosts in that
slice; every group stays, with its variables and children, empty where none of its hosts is in the
slice ("add all groups as children of all group, includes empty groups"). What one slice cannot see
is another slice's hosts: not in `groups`, not in `hostvars`.
The controller is the exception here: AWX's inventories hold no localhost (Ansible's implicit one
serves the plays and delegations on it), and the lab's inventory names it, so every slice keeps it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CONTROLLER = "localhost"


def _hosts(node: dict[str, Any]) -> list[str]:
    children = (node.get("children") or {}).values()
    return [*(node.get("hosts") or {}), *(h for child in children for h in _hosts(child or {}))]


def awx_slice(inventory: dict[str, Any], number: int, count: int) -> dict[str, Any]:
    """Slice `number` (1-based) of `count` of a YAML inventory's data, as AWX cuts it."""
    if not 1 <= number <= count:
        raise ValueError(f"slice {number} of {count}")
    names = sorted(set(_hosts(inventory["all"])) - {CONTROLLER})
    kept = set(names[number - 1 :: count]) | {CONTROLLER}

    def cut(node: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        hosts = {h: v for h, v in (node.get("hosts") or {}).items() if h in kept}
        if hosts:
            out["hosts"] = hosts
        if node.get("vars"):
            out["vars"] = node["vars"]
        children = {name: cut(child or {}) for name, child in (node.get("children") or {}).items()}
        if children:
            out["children"] = children
        return out

    return {"all": cut(inventory["all"])}


def write_slices(inventory: Path, count: int, target: Path) -> list[Path]:
    """The `count` slices of the inventory file, each in a folder of its own under target beside the
    inventory's group_vars (as AWX's synced inventory carries them)."""
    data = yaml.safe_load(inventory.read_text())
    paths = []
    for number in range(1, count + 1):
        folder = target / f"slice{number}of{count}"
        folder.mkdir(parents=True, exist_ok=True)
        group_vars = folder / "group_vars"
        if not group_vars.is_symlink():
            group_vars.symlink_to((inventory.parent / "group_vars").resolve())
        path = folder / "hosts.yml"
        path.write_text(yaml.safe_dump(awx_slice(data, number, count), sort_keys=False))
        paths.append(path)
    return paths
