"""The DCGM-format fixture exporter renders the counters file it is given."""

import argparse
import importlib.util
import re
from pathlib import Path

from ansible_collections.gpufleet.platform.plugins.module_utils import dcgm

SCRIPT = Path(__file__).resolve().parents[2] / "roles/lab_dcgm_fixture_exporter/files/dcgm_fixture_exporter.py"


def load():
    spec = importlib.util.spec_from_file_location("dcgm_fixture_exporter", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_render_matches_dcgm_exporter_format(tmp_path):
    fixture = load()
    counters = tmp_path / "counters.csv"
    counters.write_text(dcgm.counters_csv())
    args = argparse.Namespace(
        counters=str(counters),
        gpus=2,
        node_name="gpu7",
        host_label="hostname",
        model_name="NVIDIA H200",
        driver_version="580.159.04",
        uuid_prefix="GPU-x-",
        unsupported="DCGM_FI_DEV_MEMORY_TEMP",
        faults=None,
    )
    body = fixture.Fixture(args).render()
    assert "DCGM_FI_DRIVER_VERSION{" not in body  # a label, not a metric
    assert body.count("DCGM_FI_DEV_GPU_UTIL{") == 2
    assert 'hostname="gpu7"' in body and 'Hostname="' not in body
    temps = re.findall(r"^DCGM_FI_DEV_MEMORY_TEMP\{.*\} (\S+)$", body, re.M)
    assert temps and all(dcgm.is_blank(float(v)) for v in temps)


def test_injected_faults_replace_the_synthetic_values_of_their_gpu_only(tmp_path):
    fixture = load()
    counters = tmp_path / "counters.csv"
    counters.write_text(dcgm.counters_csv())
    faults = tmp_path / "faults.json"
    args = argparse.Namespace(counters=str(counters), gpus=2, node_name="gpu7", host_label="Hostname",
                              model_name="NVIDIA H200", driver_version="580.159.04", uuid_prefix="GPU-x-",
                              unsupported="", faults=str(faults))  # fmt: skip

    def xids():
        return re.findall(r'^DCGM_FI_DEV_XID_ERRORS\{gpu="(\d)".*\} (\S+)$', fixture.Fixture(args).render(), re.M)

    assert xids() == [("0", "0"), ("1", "0")]  # no file: nothing injected
    faults.write_text('{"1": {"DCGM_FI_DEV_XID_ERRORS": 48}}')
    assert xids() == [("0", "0"), ("1", "48")]
    faults.write_text("{half written")
    assert xids() == [("0", "0"), ("1", "0")]
