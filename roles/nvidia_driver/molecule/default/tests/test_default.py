"""The driver role on a Debian host, from the FIXTURE repository (see molecule.yml)."""

import json

testinfra_hosts = ["ansible://driver-node"]


def test_the_pinned_version_is_installed_and_held(host):
    pkg = host.package("nvidia-open-550")
    assert pkg.is_installed and pkg.version == "550.163.01-1"
    assert "nvidia-open-550" in host.check_output("apt-mark showhold").split()
    # A newer release of the branch is in the repository; an upgrade must not take it.
    assert "Candidate: 550.163.02-1" in host.check_output("apt-cache policy nvidia-open-550")
    upgrade = host.check_output("apt-get --simulate upgrade")
    assert "Inst nvidia-open-550" not in upgrade and "kept back:\n  nvidia-open-550" in upgrade


def test_the_repository_is_signed_and_its_key_pinned(host):
    sources = host.file("/etc/apt/sources.list.d/gpufleet-nvidia-driver.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/gpufleet-nvidia-driver.asc" in sources
    # apt verifies the InRelease signature with that key: the update succeeds without a warning.
    update = host.run("apt-get update 2>&1")
    assert update.rc == 0 and "NO_PUBKEY" not in update.stdout and "W:" not in update.stdout, update.stdout


def test_dkms_gets_the_kernel_headers(host):
    assert host.package("linux-headers-gpufleet-fixture").is_installed


def test_nouveau_is_blacklisted(host):
    conf = host.file("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf").content_string
    assert "blacklist nouveau" in conf.splitlines() and "options nouveau modeset=0" in conf.splitlines()


def test_the_driver_is_recorded_as_a_local_fact(host):
    fact = json.loads(host.file("/etc/ansible/facts.d/gpufleet_nvidia_driver.fact").content_string)
    assert fact["branch"] == 550 and fact["driver_version"] == "550.163.01"
    assert fact["cuda_version"] == "12.4" and fact["gpus"] == ["NVIDIA H200"]
    assert fact["kernel_modules"] == "open" and fact["module_build"] == "dkms"


def test_no_reboot_is_pending(host):
    # Neither nouveau nor an older nvidia module was loaded: the driver works without one.
    assert not host.file("/run/gpufleet-nvidia-driver-reboot-required").exists


def test_no_fabric_manager_without_nvswitches(host):
    # The FIXTURE PCI tree has a GPU and no NVSwitch (as the real H200 machine).
    assert not host.package("nvidia-fabricmanager-550").is_installed
