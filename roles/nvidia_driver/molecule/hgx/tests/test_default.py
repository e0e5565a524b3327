"""The driver role on a FIXTURE HGX host (see molecule.yml): the fabric manager with the driver."""

testinfra_hosts = ["ansible://instance"]


def test_the_fabric_manager_is_at_the_drivers_version_and_held_with_it(host):
    for name in ("nvidia-open-550", "nvidia-fabricmanager-550"):
        assert host.package(name).version == "550.163.01-1"
    held = host.check_output("apt-mark showhold").split()
    assert {"nvidia-open-550", "nvidia-fabricmanager-550"} <= set(held)


def test_the_fabric_manager_runs_and_starts_at_boot(host):
    service = host.service("nvidia-fabricmanager")
    assert service.is_running and service.is_enabled


def test_every_gpu_joined_the_fabric(host):
    xml = host.check_output("nvidia-smi -q -x")
    assert "<state>Completed</state>" in xml and "<status>Success</status>" in xml
