"""Triton configs from mappings: valid ones round-trip through Triton's schema, invalid ones name the field."""

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils.triton_config import (
    TritonConfigError,
    config_pbtxt,
    parse_pbtxt,
)

ONNX = {
    "name": "minilm",
    "platform": "onnxruntime_onnx",
    "max_batch_size": 32,
    "input": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]}],
    "output": [{"name": "embeddings", "data_type": "TYPE_FP32", "dims": [384]}],
    "dynamic_batching": {"preferred_batch_size": [8, 16], "max_queue_delay_microseconds": 500},
    "instance_group": [{"kind": "KIND_GPU", "count": 1}],
    "version_policy": {"latest": {"num_versions": 1}},
}
PYTHON = {
    "name": "identity",
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "instance_group": [{"kind": "KIND_CPU", "count": 2}],
}


@pytest.mark.parametrize("model", [ONNX, PYTHON])
def test_valid_configs_round_trip(model):
    parsed = parse_pbtxt(config_pbtxt(model))
    assert parsed.name == model["name"]
    assert [list(i.dims) for i in parsed.input] == [i["dims"] for i in model["input"]]


def test_onnx_config_keeps_batching_and_instances():
    parsed = parse_pbtxt(config_pbtxt(ONNX))
    assert list(parsed.dynamic_batching.preferred_batch_size) == [8, 16]
    assert parsed.dynamic_batching.max_queue_delay_microseconds == 500
    assert parsed.instance_group[0].count == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"input": [{"name": "x", "data_type": "TYPE_FP33", "dims": [3]}]}, "TYPE_FP33"),
        ({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [0, 3]}]}, "input[0].dims"),
        ({"output": [{"name": "y", "data_type": "TYPE_FP32", "dims": []}]}, "output[0].dims"),
        ({"platform": "onnx"}, "platform 'onnx' is unknown"),
        ({"max_batch_size": 4}, "preferred_batch_size [8, 16] exceed max_batch_size 4"),
        ({"dynamic_batching": {"max_que_delay": 5}}, "max_que_delay"),
        ({"name": "../etc"}, "name must be"),
    ],
)
def test_invalid_configs_name_the_field(change, message):
    with pytest.raises(TritonConfigError, match=None) as failure:
        config_pbtxt({**ONNX, **change})
    assert message in str(failure.value)
