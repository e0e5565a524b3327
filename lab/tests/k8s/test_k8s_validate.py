"""The k8s_validate action's dry run against a real API server (the lab's GPU cluster): it refuses
what Kubernetes' schema accepts (tests/unit/plugins/module_utils/test_k8s_validate.py), and persists nothing."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import k8s_validate
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def deployment(name: str, namespace: str = "default", tolerations: list | None = None) -> dict:
    spec = {"containers": [{"name": "c", "image": "registry.example/stand-in:1"}], "tolerations": tolerations or []}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def test_the_api_server_refuses_a_toleration_with_exists_and_a_value(gpu_api):
    bad = deployment(
        "gpufleet-dry-run-bad", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "value": "x"}]
    )
    assert k8s_validate.schema_problems([bad]) == ([], [])  # the schema lets it through
    problems, skipped = k8s_validate.dry_run_problems([bad], gpu_api)
    assert skipped == [] and len(problems) == 1, problems
    assert "Deployment default/gpufleet-dry-run-bad: the API server refuses it" in problems[0]
    assert "value must be empty when `operator` is 'Exists'" in problems[0]


def test_a_good_object_passes_and_nothing_is_persisted(gpu_api):
    good = deployment("gpufleet-dry-run-good")
    assert k8s_validate.dry_run_problems([good], gpu_api) == ([], [])
    with pytest.raises(ApiException) as missing:
        client.AppsV1Api(gpu_api).read_namespaced_deployment("gpufleet-dry-run-good", "default")
    assert missing.value.status == 404


def test_an_object_in_a_namespace_this_run_creates_is_skipped_and_named(gpu_api):
    first_deploy = deployment("vllm", namespace="gpufleet-not-created-yet")
    problems, skipped = k8s_validate.dry_run_problems([first_deploy], gpu_api)
    assert problems == [] and skipped == [
        "Deployment gpufleet-not-created-yet/vllm (namespace gpufleet-not-created-yet is created by this run)"
    ]


def test_the_schema_version_is_the_clusters(gpu_api):
    assert k8s_validate.server_version(gpu_api) == "1.36.0"
