"""Rendered objects against Kubernetes' OpenAPI schema, offline (module_utils/k8s_validate.py)."""

from __future__ import annotations

from ansible_collections.gpufleet.platform.plugins.module_utils import k8s_validate


def deployment(**container_overrides) -> dict:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.23.0", **container_overrides}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "inference"},
        "spec": {
            "selector": {"matchLabels": {"app": "vllm"}},
            "template": {"metadata": {"labels": {"app": "vllm"}}, "spec": {"containers": [container]}},
        },
    }


def test_a_well_formed_object_passes():
    assert k8s_validate.schema_problems([deployment()]) == ([], [])


def test_a_field_of_the_wrong_type_is_named_with_its_path():
    problems, _ = k8s_validate.schema_problems([deployment(ports=[{"containerPort": "8000"}])])
    assert problems == [
        "Deployment inference/vllm: spec.template.spec.containers[0].ports[0].containerPort:"
        " '8000' is not of type 'integer'"
    ]


def test_an_unknown_field_is_refused():
    problems, _ = k8s_validate.schema_problems([deployment(resource={"limits": {"cpu": "1"}})])
    assert len(problems) == 1 and "resource" in problems[0] and "spec.template.spec.containers[0]" in problems[0]


def test_custom_resources_have_no_schema_here_and_are_named_as_skipped():
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "vllm"}}
    assert k8s_validate.schema_problems([monitor]) == ([], ["ServiceMonitor vllm"])


def test_the_schema_accepts_what_only_the_api_server_refuses():
    # Why the server-side dry run exists (lab/tests/k8s/test_k8s_validate.py shows the API server refusing it).
    pod = deployment()
    pod["spec"]["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "x"}]
    assert k8s_validate.schema_problems([pod]) == ([], [])
