"""Value formats the roles' preflight checks accept and refuse."""

import pytest
from gpufleet.lib import validate

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    "ref",
    ["nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04", "vllm/vllm-openai:v0.11.0",
     f"registry.local:5000/team/img@{DIGEST}", f"busybox:1.36@{DIGEST}"],
)  # fmt: skip
def test_pinned_image_references(ref):
    assert validate.image_reference(ref)


@pytest.mark.parametrize(
    "ref",
    ["vllm/vllm-openai", "vllm/vllm-openai:latest", "Vllm/Upper:1", "nvcr.io/nvidia/dcgm exporter:1", ":1.0",
     "img:tag@sha256:short", "", None, 5],
)  # fmt: skip
def test_unpinned_or_malformed_image_references(ref):
    assert not validate.image_reference(ref)


def test_formats():
    assert validate.ip_address("10.213.7.11") and validate.ip_address("::1")
    assert not validate.ip_address("10.0.0.999") and not validate.ip_address("m1")
    assert validate.ip_network("10.213.240.0/24") and not validate.ip_network("10.213.240.1/24")
    assert not validate.ip_network("10.213.240.0/33") and not validate.ip_network("10.213.240.0")
    assert validate.duration("30s") and validate.duration("1h30m") and validate.duration("15d")
    assert not validate.duration("30") and not validate.duration("fast") and not validate.duration("")
    assert validate.k8s_quantity("4Gi") and validate.k8s_quantity("500m") and not validate.k8s_quantity("4GB")
    assert validate.byte_size("50GB") and not validate.byte_size("50Gi")
    assert validate.dns_label("gpu-monitoring") and not validate.dns_label("GPU_Monitoring")
    assert validate.namespaced_name("istio-system/public") and not validate.namespaced_name("public")
    assert not validate.namespaced_name("a/b/c") and not validate.namespaced_name("Istio/public")
    assert validate.route_hostname("llm.example.com") and validate.route_hostname("*.example.com")
    assert not validate.route_hostname("10.0.0.1") and not validate.route_hostname("LLM.example.com")


@pytest.mark.parametrize(
    ("value", "ok"),
    [("https://registry-1.docker.io", True), ("http://mirror:5000/", True), ("https://[::1]:5000", True),
     ("https://registry-1.docker.io/v2/library", False), ("registry-1.docker.io", False), ("https://h?x=1", False)],
)  # fmt: skip
def test_an_origin_is_a_scheme_a_host_and_a_port_only(value, ok):
    assert validate.origin(value) is ok
