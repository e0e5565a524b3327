# SPDX-License-Identifier: Apache-2.0
"""Check a role's values against the `check:` constraints of its own argument spec.

Every role runs this as its first task, after Ansible's own argument validation and before
anything that changes a host or needs a cluster, a registry or a GPU, so a malformed value
is named at once, whatever else is unreachable. It reads meta/argument_specs.yml of the role
the task belongs to, so the constraints live beside each option's type and description.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.validation import check_type_bool, check_type_float, check_type_int
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.platform.plugins.module_utils.validate import check_options

# How Ansible's own argument validation reads a string as the option's type (`-e name=15000` gives "15000").
_CONVERT = {"int": check_type_int, "float": check_type_float, "bool": check_type_bool}


def _as_typed(value: Any, kind: Any) -> Any:
    """A string as the spec's int, float or bool, as argument validation takes it; else unchanged."""
    if isinstance(value, str) and kind in _CONVERT:
        try:
            return _CONVERT[kind](value)
        except TypeError:
            return value  # argument validation names it
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("entry_point",))
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        role = self._task._role
        if role is None:
            raise AnsibleActionFail("check_values runs inside a role: it checks that role's argument spec")
        spec_file = Path(role._role_path) / "meta" / "argument_specs.yml"
        entry_point = self._task.args.get("entry_point", "main")
        options = yaml.safe_load(spec_file.read_text())["argument_specs"][entry_point].get("options") or {}
        values = {}
        for name, spec in options.items():
            try:
                values[name] = _as_typed(self._templar.template(task_vars[name]), spec.get("type"))
            except (KeyError, AnsibleError):
                continue  # unset, or no value yet (an omitted default): the role's own checks deal with it
        problems = check_options(options, values)
        result.update(changed=False, checked=sorted(values))
        if problems:
            result.update(failed=True, msg="; ".join(problems), problems=problems)
        return result
