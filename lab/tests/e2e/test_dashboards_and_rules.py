"""The monitoring role's content against the lab's kube-prometheus-stack Prometheus: the alert rules load
and evaluate, and every dashboard query is valid PromQL; the GPU fleet dashboard's
queries return the fixture exporter's data through the tunnel."""

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import PROMETHEUS

DASHBOARDS = Path(__file__).resolve().parents[3] / "roles/monitoring/files/dashboards"


def api(path: str, **params: str) -> dict:
    url = f"{PROMETHEUS}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:  # a bad query answers 400 with the parser's error
        return json.loads(exc.read())


def panel_queries(name: str) -> list[tuple[str, str]]:
    dashboard = json.loads((DASHBOARDS / name).read_text())
    # Template variables as Grafana expands "All".
    return [
        (panel["title"], re.sub(r"\$(host|model)", ".*", target["expr"]))
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


def test_alert_rules_are_loaded_and_healthy(converged):
    # The collection's groups beside kube-prometheus-stack's own (its default rules stay on).
    groups = [g for g in api("rules")["data"]["groups"] if g["name"].startswith("gpufleet-")]
    rules = [rule for group in groups for rule in group["rules"]]
    assert {g["name"] for g in groups} == {"gpufleet-gpu", "gpufleet-vllm", "gpufleet-triton"}
    assert len(rules) >= 13
    assert {rule["health"] for rule in rules} == {"ok"}, [r for r in rules if r["health"] != "ok"]


def test_every_dashboard_query_is_valid_promql(converged):
    for name in ("gpufleet-gpu-fleet.json", "gpufleet-vllm.json", "gpufleet-triton.json"):
        for title, expr in panel_queries(name):
            answer = api("query", query=expr)
            assert answer["status"] == "success", f"{name} / {title}: {answer.get('error')}"


def test_gpu_fleet_dashboard_shows_the_lab_gpu(converged):
    # The lab's fixture exporter serves dcgm-exporter's default fields without the
    # profiling (DCGM_FI_PROF_*) ones, as dcgm-exporter does without SYS_ADMIN.
    empty = [
        title
        for title, expr in panel_queries("gpufleet-gpu-fleet.json")
        if "DCGM_FI_PROF_" not in expr and not api("query", query=expr)["data"]["result"]
    ]
    assert empty == []
