"""Judging one metric's series: presence, labels, sentinels, freshness, range."""

from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv

NOW = 1_800_000_000.0
LABELS = {"gpu": "0", "UUID": "GPU-1", "pci_bus_id": "0:6", "device": "nvidia0", "modelName": "NVIDIA H200"}
UTIL = next(e for e in pv.dcgm_profile() if e.metric == "DCGM_FI_DEV_GPU_UTIL")


def series(value, instance="gpu1", age=1.0, **extra):
    return {"metric": {**LABELS, "Hostname": instance, "instance": instance, **extra}, "value": [NOW - age, str(value)]}


def judge(items, instances=("gpu1",), exp=UTIL):
    return pv.check_metric(exp, items, NOW, max_age_s=60, instances=list(instances))


def test_good_series_is_ok():
    assert judge([series(42)]).status == "ok"


def test_lowercase_hostname_is_accepted():
    item = series(42)
    item["metric"]["hostname"] = item["metric"].pop("Hostname")
    assert judge([item]).status == "ok"


def test_missing_metric_and_missing_instance():
    assert judge([]).status == "missing"
    result = judge([series(42)], instances=("gpu1", "gpu2"))
    assert result.status == "missing" and "gpu2" in result.detail


def test_missing_label_is_named():
    item = series(42)
    del item["metric"]["UUID"]
    result = judge([item])
    assert result.status == "missing_labels" and "UUID" in result.detail


def test_blank_sentinel_means_unsupported_not_a_value():
    result = judge([series(9223372036854775794)])
    assert result.status == "unsupported"


def test_stale_and_out_of_range():
    assert judge([series(42, age=300)]).status == "stale"
    result = judge([series(250)])
    assert result.status == "out_of_range" and "250" in result.detail


def test_dcgm_profile_skips_labels_and_profiling_fields():
    names = [e.metric for e in pv.dcgm_profile()]
    assert "DCGM_FI_DRIVER_VERSION" not in names
    assert not any(n.startswith("DCGM_FI_PROF_") for n in names)
    assert any(n.startswith("DCGM_FI_PROF_") for n in (e.metric for e in pv.dcgm_profile(profiling=True)))


def test_unreachable_prometheus_is_reported_not_raised():
    report = pv.verify("http://127.0.0.1:9", "job", [UTIL], timeout_s=0)
    assert not report.ok and "cannot reach Prometheus" in report.failures[0]
