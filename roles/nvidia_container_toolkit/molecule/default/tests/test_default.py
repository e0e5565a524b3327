"""The toolkit role on a Debian containerd host, from the FIXTURE repository (see molecule.yml)."""

import os

import pytest
from kubernetes import client, config

testinfra_hosts = ["ansible://toolkit-node"]

PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1"]  # fmt: skip


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_is_pinned_and_held(host, name):
    assert host.package(name).version == "1.17.8-1"
    assert name in host.check_output("apt-mark showhold").split()


def test_the_cli_is_the_pinned_release(host):
    assert "version 1.17.8" in host.check_output("nvidia-ctk --version")


def test_containerd_runs_with_the_nvidia_runtime(host):
    assert host.service("containerd").is_running
    # containerd's own reading of its configuration, not the file's text.
    dump = host.check_output("containerd config dump")
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in dump
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in dump
    # Not the default runtime unless asked: pods choose it with the RuntimeClass.
    assert 'default_runtime_name = "runc"' in dump


def test_no_cdi_spec_without_a_driver(host):
    # No NVIDIA driver in the lab: with cdi=auto nothing is generated (the H200 run generates one).
    assert not host.file("/etc/cdi/nvidia.yaml").exists


def test_the_runtime_class_is_in_the_cluster():
    config.load_kube_config(os.path.join(os.environ["GPUFLEET_REPO"], ".lab/k8s/gpu/admin.kubeconfig"))
    runtime_class = client.NodeV1Api().read_runtime_class("gpufleet-molecule-nvidia")
    assert runtime_class.handler == "nvidia"
