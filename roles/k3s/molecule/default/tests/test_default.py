"""k3s server and agent from the FIXTURE artifacts (see molecule.yml)."""

import hashlib
import os
from pathlib import Path

import pytest
import testinfra
import yaml

testinfra_hosts = ["ansible://k3s-server", "ansible://k3s-agent"]
ARTIFACTS = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "k3s-artifacts"


def server():
    return testinfra.get_host(f"ansible://k3s-server?ansible_inventory={os.environ['MOLECULE_INVENTORY_FILE']}")


def test_the_checksummed_binary_is_installed(host):
    installed = host.file("/usr/local/bin/k3s")
    assert installed.mode == 0o755
    assert installed.sha256sum == hashlib.sha256((ARTIFACTS / "k3s").read_bytes()).hexdigest()
    assert "k3s version v1.33.5+k3s1" in host.check_output("/usr/local/bin/k3s --version")
    assert host.file("/usr/local/bin/kubectl").linked_to == "/usr/local/bin/k3s"


def test_the_service_is_up(host):
    # Type=notify: active means k3s read its configuration and token and said it is ready;
    # for the agent, that the server accepted its token.
    name = "k3s" if host.backend.host == "k3s-server" else "k3s-agent"
    assert host.service(name).is_running and host.service(name).is_enabled
    assert host.run(f"systemd-analyze verify /etc/systemd/system/{name}.service").rc == 0


def test_the_token_is_shared_and_private(host):
    token = host.file("/etc/rancher/k3s/gpufleet-token")
    assert token.mode == 0o600 and len(token.content_string.strip()) == 64
    assert token.sha256sum == server().file("/etc/rancher/k3s/gpufleet-token").sha256sum


def test_config_yaml(host):
    config_file = host.file("/etc/rancher/k3s/config.yaml")
    assert config_file.mode == 0o600
    config = yaml.safe_load(config_file.content_string)
    assert config["token-file"] == "/etc/rancher/k3s/gpufleet-token" and "token" not in config
    assert config["default-runtime"] == "nvidia"
    if host.backend.host == "k3s-server":
        assert config["node-label"] == ["gpufleet.io/pool=inference", "nvidia.com/gpu.present=true"]
        assert config["node-taint"] == ["nvidia.com/gpu=present:NoSchedule"]
        assert config["disable"] == ["traefik", "servicelb"] and "server" not in config
    else:
        address = server().check_output("hostname -I").split()[0]
        assert config["server"] == f"https://{address}:6443"
        assert config["node-label"] == ["gpufleet.io/pool=inference"] and "node-taint" not in config


def test_airgap_images_are_in_place(host):
    images = host.file("/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar.zst")
    assert images.sha256sum == hashlib.sha256((ARTIFACTS / "k3s-airgap-images-amd64.tar.zst").read_bytes()).hexdigest()


@pytest.mark.parametrize("path", ["k3s.yaml"])
def test_kubeconfig_on_the_controller_points_at_the_server(path):
    kubeconfig = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / path
    assert kubeconfig.stat().st_mode & 0o777 == 0o600
    address = server().check_output("hostname -I").split()[0]
    assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == f"https://{address}:6443"
