"""Rendered helm values against a chart version's known keys."""

from gpufleet.lib.helm_values import unknown_keys, value_paths


def test_leaves_are_dotted_paths_and_lists_are_leaves():
    values = {"driver": {"enabled": False}, "toolkit": {"env": [{"name": "A", "value": "b"}]}, "x": {}}
    assert value_paths(values) == ["driver.enabled", "toolkit.env", "x"]


def test_unknown_keys_are_listed_and_free_form_maps_are_allowed():
    values = {"cdi": {"enabled": True, "default": False}, "sm": {"labels": {"release": "m"}}}
    assert unknown_keys(values, ["cdi.enabled", "sm.labels.*"]) == ["cdi.default"]
    assert unknown_keys(values, ["cdi.enabled", "cdi.default", "sm.labels.*"]) == []
