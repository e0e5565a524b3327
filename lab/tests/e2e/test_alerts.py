"""A fresh platform raises no alert of its own, and `gpufleet verify` says so; an alert that fires
is named by verify, which then fails (the drill: a rule that always fires, added and taken away)."""

from __future__ import annotations

import json
import time
import urllib.request

import gpufleet_lab as lab
from conftest import PROMETHEUS, gpufleet
from gpufleet_lab import k8s as labk8s
from kubernetes import client, config

DRILL_RULE = "gpufleet-verify-drill"
DRILL_ALERT = "GpufleetVerifyDrill"


def prometheus(path: str) -> dict:
    with urllib.request.urlopen(f"{PROMETHEUS}{path}", timeout=10) as answer:
        return json.load(answer)["data"]


def alert_row(proc) -> dict:
    [row] = [c for c in json.loads(proc.stdout)["checks"] if c["check"] == "no alert firing in Prometheus"]
    return row


def test_every_target_of_the_main_clusters_prometheus_is_up(converged):
    # kwok's stand-in control-plane node has no kubelet or node exporter: the lab leaves its targets out.
    down = [
        (t["scrapePool"], t["scrapeUrl"]) for t in prometheus("/api/v1/targets")["activeTargets"] if t["health"] != "up"
    ]
    assert down == []


def test_verify_names_a_firing_alert_and_fails_then_passes_once_it_resolves(converged):
    rules = client.CustomObjectsApi(config.new_client_from_config(str(labk8s.kubeconfig_path("main"))))
    body = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": DRILL_RULE, "namespace": "monitoring", "labels": {"release": "monitoring"}},
        "spec": {"groups": [{"name": DRILL_RULE, "rules": [{
            "alert": DRILL_ALERT, "expr": "vector(1)", "labels": {"severity": "warning"},
            "annotations": {"summary": "the verify drill's alert"},
        }]}]},
    }  # fmt: skip
    rules.create_namespaced_custom_object("monitoring.coreos.com", "v1", "monitoring", "prometheusrules", body)
    try:
        deadline = time.monotonic() + 180
        while not any(a["labels"]["alertname"] == DRILL_ALERT and a["state"] == "firing"
                      for a in prometheus("/api/v1/alerts")["alerts"]):  # fmt: skip
            assert time.monotonic() < deadline, "the drill's rule never fired"
            time.sleep(3)
        caught = gpufleet("--json", "verify", "-i", str(lab.LAB_INVENTORY.parent))
        assert caught.returncode == 3, caught.stderr
        row = alert_row(caught)
        assert row["status"] == "failed" and f"firing: {DRILL_ALERT}: the verify drill's alert" in row["detail"], row
    finally:
        rules.delete_namespaced_custom_object(
            "monitoring.coreos.com", "v1", "monitoring", "prometheusrules", DRILL_RULE
        )
    deadline = time.monotonic() + 180
    while any(a["labels"]["alertname"] == DRILL_ALERT for a in prometheus("/api/v1/alerts")["alerts"]):
        assert time.monotonic() < deadline, "the drill's alert outlived its rule"
        time.sleep(3)
    clean = gpufleet("--json", "verify", "-i", str(lab.LAB_INVENTORY.parent))
    row = alert_row(clean)
    assert row["status"] == "passed" and row["detail"].startswith("none firing"), row
    assert clean.returncode == 0, clean.stderr
