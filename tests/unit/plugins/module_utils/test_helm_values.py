"""Rendered helm values against a chart version's known keys; images as charts take them."""

import pytest
from gpufleet.lib.helm_values import chart_image, unknown_keys, value_paths


def test_leaves_are_dotted_paths_and_lists_are_leaves():
    values = {"driver": {"enabled": False}, "toolkit": {"env": [{"name": "A", "value": "b"}]}, "x": {}}
    assert value_paths(values) == ["driver.enabled", "toolkit.env", "x"]


def test_unknown_keys_are_listed_and_free_form_maps_are_allowed():
    values = {"cdi": {"enabled": True, "default": False}, "sm": {"labels": {"release": "m"}}}
    assert unknown_keys(values, ["cdi.enabled", "sm.labels.*"]) == ["cdi.default"]
    assert unknown_keys(values, ["cdi.enabled", "cdi.default", "sm.labels.*"]) == []


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        ("localhost/gpufleet-lab/prometheus:v2.42.0", ("localhost", "gpufleet-lab/prometheus", "v2.42.0", "")),
        ("quay.io/prometheus/prometheus:v3.7.2", ("quay.io", "prometheus/prometheus", "v3.7.2", "")),
        (
            "registry.internal:5000/mirror/prometheus:v3.7.2",
            ("registry.internal:5000", "mirror/prometheus", "v3.7.2", ""),
        ),
        ("prom/prometheus:v3.7.2", ("docker.io", "prom/prometheus", "v3.7.2", "")),  # as runtimes read it
        ("busybox:1.36", ("docker.io", "library/busybox", "1.36", "")),
        (
            "quay.io/prometheus/prometheus:v3.7.2@sha256:" + "a" * 64,
            ("quay.io", "prometheus/prometheus", "v3.7.2", "a" * 64),
        ),
        ("quay.io/prometheus/prometheus@sha256:" + "b" * 64, ("quay.io", "prometheus/prometheus", "", "b" * 64)),
    ],
)
def test_an_image_reference_becomes_the_charts_image_values(reference, parts):
    assert chart_image(reference) == dict(zip(("registry", "repository", "tag", "sha"), parts, strict=True))
