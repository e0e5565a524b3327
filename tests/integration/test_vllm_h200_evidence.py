"""Real vLLM 0.23 on the H200, served with the vllm role's own command line
(tests/fixtures/device/run_vllm_h200.sh): what it measured, and its metrics checked again here.

The run kept its Prometheus's TSDB: a real Prometheus (Debian's, as on the H200) is started on
it here with the collection's vLLM alert rules, and every panel query of the vLLM dashboard is
evaluated again at the time of the run, so a change to the dashboard is tested against real vLLM
series, not against names we wrote down."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "tests/fixtures/device/h200-vllm"
sys.path.insert(0, str(REPO / "tests/fixtures/device"))

pytestmark = pytest.mark.skipif(not (EVIDENCE / "prometheus-tsdb.tar.gz").exists(), reason="no H200 run kept yet")


@pytest.fixture(scope="module")
def observed():
    return json.loads((EVIDENCE / "observability.json").read_text())


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    work = tmp_path_factory.mktemp("tsdb")
    with tarfile.open(EVIDENCE / "prometheus-tsdb.tar.gz") as archive:
        # The "data" filter (no links or paths out of the archive) where this Python has it: 3.11.4 and
        # later, and Debian's security updates of 3.11.2; Debian 12's first 3.11.2 has not.
        archive.extractall(work, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = work / "prometheus.yml"
    config.write_text(
        "global: {evaluation_interval: 1s}\n"
        f"rule_files: [{REPO}/roles/monitoring/files/rules/gpufleet-vllm.rules.yml]\n"
    )
    server = subprocess.Popen(
        [shutil.which("prometheus") or "prometheus", f"--config.file={config}",
         f"--storage.tsdb.path={work / 'prometheus-data'}", "--storage.tsdb.retention.time=100y",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_role_rendered_the_command_vllm_ran(observed):
    command = json.loads((EVIDENCE / "vllm-command.json").read_text())
    assert command["command"] == ["vllm", "serve"] and command["args"][0] == "/models/qwen2.5-3b-random"
    log = (EVIDENCE / "vllm.log").read_text()
    assert "vllm command: python3 -m vllm.entrypoints.cli.main serve /models/qwen2.5-3b-random" in log
    assert "--load-format dummy" in log and "vLLM healthy after" in log


def test_the_ladder_on_real_vllm(observed):
    result = json.loads((EVIDENCE / "benchmark.json").read_text())
    assert [lv["level"] for lv in result["levels"]] == [1, 5, 30, 64, 128, 256]
    assert result["fixed_length"]["used"] is True  # vLLM takes ignore_eos and min_tokens
    assert result["dialect"]["done_marker"] is True
    assert result["gpu_source"] == "nvml"
    for level in result["levels"]:
        assert level["errors"] == {} and level["valid"], level
        assert level["output_tokens_per_request"]["p50"] == 128
        assert level["gpu"]["tokens_per_joule"] > 0
        assert level["server"]["source"] == "prometheus (vLLM)"
        assert level["server"]["kv_cache_usage_max"] is not None
    tput = [lv["output_tokens_per_s"] for lv in result["levels"]]
    assert tput[0] < tput[1] < tput[2]  # the seed's 1/5/30 rise


def test_on_the_h200_every_panel_rule_and_series_checked_out(observed):
    assert all(panel["ok"] for panel in observed["panels"]), [p for p in observed["panels"] if not p["ok"]]
    assert observed["rules"] and all(rule["health"] == "ok" for rule in observed["rules"]), observed["rules"]
    assert observed["verify"]["ok"], observed["verify"]["failures"]


def test_the_dashboard_queries_return_data_from_the_kept_tsdb(prometheus, observed):
    import check_vllm_observability as check

    deadline = time.monotonic() + 20
    while True:  # the rules' first evaluation, a second after the start
        again = check.check(prometheus, observed["at"], max_age_s=0, live=False)
        if all(rule["health"] != "unknown" for rule in again["rules"]) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    missing = [p for p in again["panels"] if not p["ok"]]
    assert not missing, missing
    assert again["rules"] and all(rule["health"] == "ok" for rule in again["rules"]), again["rules"]
    assert set(again["vllm_metric_names"]) >= {"vllm:num_requests_running", "vllm:kv_cache_usage_perc"}
