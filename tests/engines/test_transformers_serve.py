"""The benchmark against a real OpenAI-compatible engine: `transformers serve --continuous-batching`
(PyPI, on CPU) serving a tiny random-initialised Qwen2 model built at test time.

This engine's dialect is not vLLM's: it refuses vLLM's ignore_eos/min_tokens with HTTP 422,
ends its stream without `data: [DONE]`, puts usage in its last chunk beside a finish_reason,
sends a role-only first event, and one event may carry a partial token's empty text. The
benchmark must still count every token, name what it met, and not flood it when it fails.

The engine's virtualenv is made by scripts/setup-engines.sh (`make engines`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb

REPO = Path(__file__).resolve().parents[2]


def config(url: str, model: str, **overrides) -> lb.BenchConfig:
    settings = {"base_url": url, "model": model, "api": "chat", "levels": [1, 4], "warmup_s": 1.0,
                "duration_s": 6.0, "max_tokens": 16, "prompt_words": (20, 40)}  # fmt: skip
    return lb.BenchConfig(**{**settings, **overrides})


def test_chat_ladder_counts_every_token_and_names_the_dialect(engine):
    url, model = engine.url, engine.model
    result = lb.run_benchmark(config(url, model)).as_dict()
    assert result["fixed_length"]["used"] is False
    assert "422" in result["fixed_length"]["why"] and "ignore_eos" in result["fixed_length"]["why"]
    assert result["dialect"]["done_marker"] is False
    assert result["dialect"]["usage"] == "in a chunk with choices"
    assert result["dialect"]["role_only_first_event"] is True
    for level in result["levels"]:
        assert level["errors"] == {}, level["error_messages"]
        assert level["completed"] > 0 and level["output_tokens_per_s"] > 0
        # Usage, not content events, counts the tokens: 16 asked, and what arrived is counted.
        assert 1 <= level["output_tokens_per_request"]["p50"] <= 16
        assert level["input_tokens"]["p50"] > 20  # the random prompts arrived, at their length
        assert level["ttft"]["p50"] > 0 and level["e2e"]["p50"] >= level["ttft"]["p50"]
        assert level["valid"], level["invalid_reasons"]
    assert result["operating_point_index"] is not None
    assert any("output length not fixed" in w for w in result["warnings"])


def test_completions_api(engine):
    url, model = engine.url, engine.model
    result = lb.run_benchmark(config(url, model, api="completions", levels=[2], fixed_length="off")).as_dict()
    level = result["levels"][0]
    assert level["errors"] == {} and level["output_tokens_per_s"] > 0
    assert result["fixed_length"] == {"used": False, "why": "fixed_length=off"}


def test_refused_requests_show_the_servers_reason_back_off_and_stop_the_ladder(engine):
    url, model = engine.url, engine.model
    result = lb.run_benchmark(config(url, model, fixed_length="on", levels=[1, 4], duration_s=5.0)).as_dict()
    level = result["levels"][0]
    assert set(level["errors"]) == {"http_422"}
    assert "ignore_eos" in level["error_messages"]["http_422"][0]
    assert level["stopped_early"] and not level["valid"]
    # Backing off, one user sent a handful of requests before the level stopped, not thousands.
    assert sum(level["errors"].values()) <= 15
    assert len(result["levels"]) == 1 and "levels 4 not run" in " ".join(result["warnings"])
    assert result["operating_point_index"] is None and result["knee_index"] is None


def test_the_cli_benchmarks_the_engine_and_writes_the_report(engine, tmp_path):
    url, model = engine.url, engine.model
    proc = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "--json", "bench", "--url", url, "--model", model, "--levels", "1,2",
         "--duration", "5", "--warmup", "1", "--max-tokens", "12", "--input-len", "20:30", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert all(lv["output_tokens_per_s"] > 0 and lv["errors"] == {} for lv in result["levels"])
    assert "server dialect: [DONE] marker no" in proc.stderr
    page = (tmp_path / "benchmark.html").read_text()
    assert page.count("<svg") >= 3 and "TPOT p50" in page and "fixed output length: no" in page


def test_the_ansible_module_benchmarks_the_engine(engine, tmp_path):
    url, model = engine.url, engine.model
    playbook = [{
        "hosts": "localhost", "gather_facts": False,
        "tasks": [{"gpufleet.platform.llm_benchmark": {"url": url, "model": model, "levels": [2], "duration": 5,
                                                       "warmup": 1, "max_tokens": 12, "prompt_words": [20, 30]},
                   "register": "bench"},
                  {"ansible.builtin.copy": {"content": "{{ bench | to_json }}", "dest": str(tmp_path / "out.json")}}],
    }]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(playbook))
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"),
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    }
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["levels"][0]["output_tokens_per_s"] > 0 and result["levels"][0]["errors"] == {}
    assert result["fixed_length"]["used"] is False and result["dialect"]["done_marker"] is False
