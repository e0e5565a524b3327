"""The collection's table of dcgm-exporter counters, and blank sentinels."""

from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import dcgm

# dcgm-exporter's default-counters.csv at two releases, as they shipped.
REFERENCE = Path(__file__).resolve().parents[3] / "fixtures" / "reference"


@pytest.mark.parametrize("value", [9223372036854775794, 9.223372036854776e18, 2147483632, 2147483634, 2.0**47 + 2])
def test_blank_sentinels_are_not_readings(value):
    assert dcgm.is_blank(float(value))


@pytest.mark.parametrize("value", [0, 100, 143771, 1e12, 2147483631])
def test_ordinary_values_are_readings(value):
    assert not dcgm.is_blank(float(value))


def test_counters_csv_round_trips():
    rows = dcgm.parse_counters_csv(dcgm.counters_csv(profiling=True))
    assert [r[0] for r in rows] == [c.name for c in dcgm.DEFAULT_COUNTERS]
    assert not any(r[0].startswith("DCGM_FI_PROF_") for r in dcgm.parse_counters_csv(dcgm.counters_csv()))


def test_required_set_is_the_nineteen_seed_metrics_minus_model_specific_ones():
    required = dcgm.required_metrics()
    assert "DCGM_FI_DEV_GPU_UTIL" in required and "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in required
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in required  # absent or blank on some models
    assert len(required) == 13


@pytest.mark.parametrize("release", ["3.3.7-3.5.0", "4.5.3-4.8.2"])
def test_table_covers_every_upstream_default_counter(release):
    upstream = dcgm.parse_counters_csv((REFERENCE / f"dcgm-exporter-default-counters.{release}.csv").read_text())
    ours = {c.name: c.kind for c in dcgm.DEFAULT_COUNTERS}
    for name, kind, _ in upstream:
        assert name in ours, name
        if release.startswith("4."):  # 3.x typed the PCIe byte rates as counters; the table follows 4.x
            assert ours[name] == kind, name
