# SPDX-License-Identifier: Apache-2.0
"""Triton model configurations from plain data, checked against Triton's own schema.

The schema is the ModelConfig protobuf that tritonclient ships; a mapping that does
not fit it is refused with the field named, before anything is written anywhere.
Runs on the controller (the filter plugin triton_config_pbtxt calls it).
"""

from __future__ import annotations

import re
from typing import Any

PLATFORMS = {
    "onnxruntime_onnx", "tensorrt_plan", "pytorch_libtorch", "tensorflow_savedmodel", "tensorflow_graphdef",
}  # fmt: skip
BACKENDS = {"python", "onnxruntime", "tensorrt", "pytorch", "tensorflow", "openvino", "fil", "dali", "vllm"}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class TritonConfigError(ValueError):
    pass


def _schema() -> Any:
    try:
        from tritonclient.grpc import model_config_pb2
    except ImportError as exc:  # pragma: no cover - tritonclient[grpc] is in the pinned set
        raise TritonConfigError("tritonclient[grpc] is needed on the controller to check Triton configs") from exc
    return model_config_pb2


def _check_tensors(model: str, kind: str, tensors: list[dict[str, Any]]) -> None:
    for index, tensor in enumerate(tensors):
        where = f"model {model}: {kind}[{index}]"
        dims = tensor.get("dims")
        if not isinstance(dims, list) or not dims:
            raise TritonConfigError(f"{where}.dims: give a non-empty list of sizes (-1 for a variable size)")
        bad = [d for d in dims if not isinstance(d, int) or isinstance(d, bool) or d < -1 or d == 0]
        if bad:
            raise TritonConfigError(f"{where}.dims: {bad} are not sizes; use positive integers or -1 (variable)")


def model_config(model: dict[str, Any]) -> Any:
    """The ModelConfig message for one model mapping, or TritonConfigError naming the field."""
    from google.protobuf import json_format

    name = str(model.get("name", ""))
    if not _NAME.match(name):
        raise TritonConfigError(f"model {name!r}: name must be letters, digits, '_', '.' or '-' (it is a directory)")
    platform, backend = model.get("platform"), model.get("backend")
    if not platform and not backend:
        raise TritonConfigError(f"model {name}: set platform (e.g. onnxruntime_onnx) or backend (e.g. python)")
    if platform and platform not in PLATFORMS:
        raise TritonConfigError(f"model {name}: platform {platform!r} is unknown; one of {sorted(PLATFORMS)}")
    if backend and backend not in BACKENDS:
        raise TritonConfigError(f"model {name}: backend {backend!r} is unknown; one of {sorted(BACKENDS)}")
    _check_tensors(name, "input", model.get("input", []))
    _check_tensors(name, "output", model.get("output", []))
    batching = model.get("dynamic_batching")
    max_batch = int(model.get("max_batch_size", 0))
    if batching is not None:
        if max_batch <= 0:
            raise TritonConfigError(f"model {name}: dynamic_batching needs max_batch_size > 0")
        too_big = [s for s in batching.get("preferred_batch_size", []) if s > max_batch]
        if too_big:
            raise TritonConfigError(
                f"model {name}: dynamic_batching.preferred_batch_size {too_big} exceed max_batch_size {max_batch}"
            )
    try:
        return json_format.ParseDict(model, _schema().ModelConfig())
    except json_format.ParseError as exc:
        raise TritonConfigError(f"model {name}: {exc}") from exc


def config_pbtxt(model: dict[str, Any]) -> str:
    """config.pbtxt text for one model mapping (checked first)."""
    from google.protobuf import text_format

    text: str = text_format.MessageToString(model_config(model))
    return text


def parse_pbtxt(text: str) -> Any:
    """Read a config.pbtxt back into a ModelConfig (what Triton itself does)."""
    from google.protobuf import text_format

    return text_format.Parse(text, _schema().ModelConfig())
