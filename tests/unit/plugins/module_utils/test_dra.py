"""GPUs claimed by what they are: the ResourceClaimTemplate a serving role renders, its CEL selectors, the
checks of the values they come from, and the API server's complaints named by variable."""

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import dra, k8s_validate

LABELS = {"app.kubernetes.io/instance": "vllm", "app.kubernetes.io/managed-by": "gpufleet"}


def request(**overrides):
    base = {"device_class": "gpu.nvidia.com", "count": 1, "domain": "gpu.nvidia.com", "memory_at_least": "",
            "product_name": "", "mig_profile": "", "selectors": []}  # fmt: skip
    return {**base, **overrides}


def test_the_template_asks_the_class_for_the_count_with_a_selector_per_value():
    template = dra.claim_template(
        request(count=2, memory_at_least="40Gi", product_name="NVIDIA H200", selectors=["device.driver == 'x'"]),
        "vllm", "inference", LABELS,
    )  # fmt: skip
    (req,) = template["spec"]["spec"]["devices"]["requests"]
    assert (
        req["name"] == "gpu" and req["exactly"]["deviceClassName"] == "gpu.nvidia.com" and req["exactly"]["count"] == 2
    )
    assert [s["cel"]["expression"] for s in req["exactly"]["selectors"]] == [
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
        "device.driver == 'x'",
    ]
    # The released schema of resource.k8s.io/v1 (Kubernetes 1.36) takes it as rendered.
    assert k8s_validate.schema_problems([template], "1.36")[0] == []


def test_a_template_without_selectors_carries_none_and_passes_the_schema():
    template = dra.claim_template(request(), "vllm", "inference", LABELS)
    assert "selectors" not in template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert k8s_validate.schema_problems([template], "1.36")[0] == []


def test_a_changed_request_is_a_new_template_and_the_same_one_keeps_its_name():
    """The API server refuses a change to a template's spec: the name carries the request's hash."""
    first = dra.claim_template_name(request(memory_at_least="40Gi"), "vllm")
    assert first == dra.claim_template_name(request(memory_at_least="40Gi"), "vllm")
    assert first != dra.claim_template_name(request(memory_at_least="80Gi"), "vllm")
    assert first.startswith("vllm-gpu-") and len(first) == len("vllm-gpu-") + 10


def test_a_product_name_with_a_quote_stays_one_cel_string():
    (expression, variable) = dra.selectors(request(product_name="it's \\ odd"), "vllm_dra")[0]
    assert expression == "device.attributes['gpu.nvidia.com'].productName == 'it\\'s \\\\ odd'"
    assert variable == "vllm_dra_product_name"


def test_a_mig_profile_selects_the_attribute_and_an_unknown_profile_is_named():
    assert (
        dra.selectors(request(mig_profile="1g.18gb"), "p")[0][0]
        == "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"
    )
    assert dra.problems(request(mig_profile="1g.18gb"), "vllm_dra") == []
    (problem,) = dra.problems(request(mig_profile="1g.19gb"), "vllm_dra")
    assert problem.startswith("vllm_dra_mig_profile='1g.19gb' is no MIG profile") and "1g.18gb" in problem


@pytest.mark.parametrize(
    ("selectors", "expected"),
    [
        ("device.driver == 'x'", "vllm_dra_selectors must be a list of CEL expressions, not str"),
        (["device.driver == 'x'", "  "], "vllm_dra_selectors[1] must be a non-empty CEL expression, not '  '"),
    ],
)
def test_selectors_that_are_not_a_list_of_expressions_are_named_with_the_item(selectors, expected):
    assert dra.problems(request(selectors=selectors), "vllm_dra") == [expected]


def test_the_api_servers_complaint_names_the_variable_its_selector_came_from():
    """The server names spec.spec.devices.requests[0].exactly.selectors[N]; the user wrote a variable."""
    req = request(memory_at_least="40Gi", selectors=["device.driver == 'x'", "device.attributes[[ oops"])
    complaint = ("ResourceClaimTemplate default/vllm-gpu-0123456789: the API server refuses it: "
                 "spec.spec.devices.requests[0].exactly.selectors[2].cel.expression: Invalid value: "
                 "\"device.attributes[[ oops\": compilation failed")  # fmt: skip
    (named,) = dra.dry_run_problems([complaint], req, "vllm_dra")
    assert named.startswith("vllm_dra_selectors[1]: ") and "compilation failed" in named
    (other,) = dra.dry_run_problems(["ResourceClaimTemplate x: spec.spec.devices.requests[0].exactly.count: bad"], req,
                                    "vllm_dra")  # fmt: skip
    assert other.startswith("the GPU claim (vllm_dra_*): ")
