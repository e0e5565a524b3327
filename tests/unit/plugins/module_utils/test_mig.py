"""MIG layouts against the profiles each GPU model offers, and mig-parted's configuration."""

from ansible_collections.gpufleet.platform.plugins.module_utils import mig


def test_a_full_h200_layout_passes_on_an_h200_and_is_refused_on_an_a100():
    layout = {"1g.18gb": 7}
    assert mig.layout_problems("l", layout, "NVIDIA H200") == []
    [problem] = mig.layout_problems("l", layout, "NVIDIA A100-SXM4-80GB")
    assert problem.startswith("l.1g.18gb: not a MIG profile (NVIDIA A100-SXM4-80GB offers 1g.10gb")


def test_more_than_seven_compute_slices_is_refused():
    assert mig.layout_problems("l", {"4g.71gb": 1, "3g.71gb": 1}, "H200") == []
    assert mig.layout_problems("l", {"4g.71gb": 2}) == ["l: takes 8 compute slices, a GPU has 7"]


def test_counts_and_unknown_models_are_named():
    assert mig.layout_problems("l", {"1g.18gb": 0}) == ["l.1g.18gb=0: the count must be a positive integer"]
    assert "not a MIG-capable GPU" in mig.layout_problems("l", {"1g.18gb": 1}, "NVIDIA L40S")[0]
    assert mig.layout_problems("l", {}) == ["l must map MIG profiles to counts, e.g. {1g.18gb: 7}"]


def test_the_real_h200_capture_is_a_known_model():
    # The captured H200's nvidia-smi (tests/fixtures) names the GPU "NVIDIA H200".
    assert mig.model_key("NVIDIA H200") in mig.PROFILES


def test_parted_config_has_all_disabled_and_each_layout_on_every_gpu():
    config = mig.parted_config({"h200-7x1g": {"1g.18gb": 7}})
    assert config["version"] == "v1"
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    [h200] = config["mig-configs"]["h200-7x1g"]
    assert h200 == {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}
