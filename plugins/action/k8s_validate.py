# SPDX-License-Identifier: Apache-2.0
"""Check a role's rendered Kubernetes objects before its first write (module_utils/k8s_validate.py):
the OpenAPI schema offline, always; the API server's server-side dry run when the cluster answers.

Arguments: definitions (a list of objects), kubeconfig (optional: without it, or with the cluster
unreachable, only the schema is checked, and the result says so), version (the schema's Kubernetes
version when no cluster answers). Runs on the controller, where the kubeconfig is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.platform.plugins.module_utils import k8s_validate


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("definitions", "kubeconfig", "version"))
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        objects = [o for o in self._task.args.get("definitions") or [] if o]
        if not all(isinstance(o, dict) and o.get("kind") and o.get("apiVersion") for o in objects):
            raise AnsibleActionFail("k8s_validate: definitions must be Kubernetes objects with apiVersion and kind")
        kubeconfig = self._task.args.get("kubeconfig") or ""
        version = str(self._task.args.get("version") or k8s_validate.DEFAULT_VERSION)
        api_client, unreachable = None, ""
        if kubeconfig and Path(kubeconfig).is_file():
            try:
                from kubernetes import config

                api_client = config.new_client_from_config(kubeconfig)
                version = k8s_validate.server_version(api_client)
            except Exception as error:  # no answer: the schema alone, said so
                api_client, unreachable = None, f"{type(error).__name__}: {error}"
        else:
            unreachable = "no kubeconfig" if not kubeconfig else f"{kubeconfig} is not a file"
        try:
            problems, skipped = k8s_validate.schema_problems(objects, version)
        except RuntimeError as error:
            raise AnsibleActionFail(str(error)) from error
        dry_run_skipped: list[str] = []
        if api_client is not None and not problems:
            found, dry_run_skipped = k8s_validate.dry_run_problems(objects, api_client)
            problems += found
        result.update(
            changed=False, schema_version=version, checked=[k8s_validate.describe(o) for o in objects],
            schema_skipped=skipped, dry_run=api_client is not None, dry_run_skipped=dry_run_skipped,
        )  # fmt: skip
        if unreachable:
            result["dry_run_not_done"] = unreachable
        if problems:
            result.update(failed=True, msg="; ".join(problems), problems=problems)
        else:
            how = "and the API server's dry run" if api_client is not None else f"(no dry run: {unreachable})"
            result["msg"] = f"{len(objects)} object(s) pass the Kubernetes {version} schema {how}"
        return result
