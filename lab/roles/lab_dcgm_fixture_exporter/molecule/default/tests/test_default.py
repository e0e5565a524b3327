"""The fixture exporter serves dcgm-exporter's format on loopback only."""

import re

METRICS = "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9400/metrics').read().decode())\""


def test_listens_on_loopback_only(host):
    assert host.socket("tcp://127.0.0.1:9400").is_listening
    assert not host.socket("tcp://0.0.0.0:9400").is_listening


def test_runs_unprivileged_and_enabled(host):
    service = host.service("gpufleet-dcgm-fixture-exporter")
    assert service.is_running and service.is_enabled
    user = host.check_output("systemctl show -p User,DynamicUser gpufleet-dcgm-fixture-exporter")
    assert "DynamicUser=yes" in user


def test_serves_every_default_field_with_dcgm_labels(host):
    body = host.check_output(METRICS)
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in body
    util = re.findall(r"^DCGM_FI_DEV_GPU_UTIL\{(.*)\} (\S+)$", body, re.M)
    assert len(util) == 2  # two simulated GPUs
    labels = dict(pair.split("=", 1) for pair in util[0][0].split(","))
    for name in ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"):
        assert name in labels
    assert 0 <= float(util[0][1]) <= 100


def test_unsupported_fields_carry_the_blank_sentinel(host):
    body = host.check_output(METRICS)
    values = re.findall(r"^DCGM_FI_DEV_VGPU_LICENSE_STATUS\{.*\} (\S+)$", body, re.M)
    assert values and all(float(v) > 9.2e18 for v in values)
