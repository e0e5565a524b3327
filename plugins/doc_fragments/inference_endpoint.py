# SPDX-License-Identifier: Apache-2.0
"""The options of every module that sends requests to a serving endpoint (vLLM's OpenAI-compatible
API, Triton's, a KServe InferenceService)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  url:
    description: Base URL of the endpoint, for example C(http://vllm.inference:8000).
    type: str
    required: true
  model:
    description: Served model name (vLLM) or the model's name in the repository (Triton).
    type: str
    required: true
  api_key:
    description:
      - Bearer key of a server that asks for one (vLLM's C(VLLM_API_KEY)), from a vault; never in the result.
    type: str
"""
