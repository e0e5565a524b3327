"""The mirror data model and what it renders for containerd, k3s and Docker."""

import tomllib

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import registry_mirrors as rm

LAB = {"registry": "10.213.7.31:5000", "endpoints": ["http://10.213.7.11:5000"], "upstream": "http://10.213.7.31:5000"}
HUB = {"registry": "docker.io", "endpoints": ["https://mirror.internal:5000/"], "ca_file": "/etc/ssl/mirror-ca.pem"}


def test_hosts_toml_is_toml_that_names_the_upstream_and_the_mirror():
    document = tomllib.loads(rm.containerd_hosts_toml(LAB))
    assert document["server"] == "http://10.213.7.31:5000"
    assert document["host"]["http://10.213.7.11:5000"] == {"capabilities": ["pull", "resolve"]}


def test_docker_hub_defaults_to_its_real_endpoint_and_keeps_the_ca():
    document = tomllib.loads(rm.containerd_hosts_toml(HUB))
    assert document["server"] == "https://registry-1.docker.io"
    assert document["host"]["https://mirror.internal:5000"]["ca"] == "/etc/ssl/mirror-ca.pem"


def test_k3s_registries_lists_mirrors_and_tls_per_endpoint_host():
    document = rm.k3s_registries([LAB, {**HUB, "skip_verify": True}])
    assert document["mirrors"]["docker.io"] == {"endpoint": ["https://mirror.internal:5000"]}
    assert document["mirrors"]["10.213.7.31:5000"] == {"endpoint": ["http://10.213.7.11:5000"]}
    assert document["configs"] == {
        "mirror.internal:5000": {"tls": {"insecure_skip_verify": True, "ca_file": "/etc/ssl/mirror-ca.pem"}}
    }


def test_docker_gets_only_the_docker_hub_mirrors():
    assert rm.docker_registry_mirrors([LAB, HUB]) == ["https://mirror.internal:5000"]


@pytest.mark.parametrize(
    ("mirrors", "named"),
    [
        ({"registry": "docker.io"}, "must be a list"),
        ([{"registry": "docker.io", "endpoints": []}], "[0].endpoints"),
        ([{"registry": "https://docker.io", "endpoints": ["https://m:5000"]}], "[0].registry"),
        ([{"registry": "docker.io", "endpoints": ["mirror:5000"]}], "[0].endpoints[0]"),
        ([{"registry": "docker.io", "endpoints": ["https://m:5000"], "mirror": "x"}], "unknown key(s) mirror"),
        ([{"registry": "docker.io", "endpoints": ["https://m:5000"], "ca_file": "ca.pem"}], "[0].ca_file"),
        ([HUB, HUB], "docker.io listed more than once"),
    ],
)
def test_bad_entries_are_named(mirrors, named):
    with pytest.raises(rm.MirrorError, match=None) as error:
        rm.normalize(mirrors)
    assert named in str(error.value)


@pytest.mark.parametrize(
    ("reference", "split"),
    [
        ("busybox:1.36", ("docker.io", "library/busybox:1.36")),
        ("vllm/vllm-openai:v0.11.0", ("docker.io", "vllm/vllm-openai:v0.11.0")),
        ("nvcr.io/nvidia/tritonserver:25.09-py3", ("nvcr.io", "nvidia/tritonserver:25.09-py3")),
        ("10.213.7.31:5000/gpufleet/fixture:1", ("10.213.7.31:5000", "gpufleet/fixture:1")),
        ("localhost/x@sha256:" + "a" * 64, ("localhost", "x@sha256:" + "a" * 64)),
    ],
)
def test_references_split_as_containerd_resolves_them(reference, split):
    assert rm.split_reference(reference) == split


HARBOR = {"registry": "docker.io", "endpoints": ["https://harbor.internal"], "project": "dockerhub-proxy"}


def test_a_harbor_project_is_a_prefixed_host_with_override_path_for_containerd():
    document = tomllib.loads(rm.containerd_hosts_toml(HARBOR))
    assert document["host"] == {
        "https://harbor.internal/v2/dockerhub-proxy": {"capabilities": ["pull", "resolve"], "override_path": True}
    }


def test_a_harbor_project_is_a_rewrite_for_k3s():
    assert rm.k3s_registries([HARBOR])["mirrors"]["docker.io"] == {
        "endpoint": ["https://harbor.internal"],
        "rewrite": {"^(.*)$": "dockerhub-proxy/$1"},
    }


def test_docker_cannot_use_a_project_and_says_so():
    with pytest.raises(rm.MirrorError, match=r"gpufleet_registry_mirrors\[0\].project: Docker"):
        rm.docker_registry_mirrors([HARBOR])
    with pytest.raises(rm.MirrorError, match=r"\[0\].project: 'Docker Hub' is not a project name"):
        rm.normalize([{**HARBOR, "project": "Docker Hub"}])
