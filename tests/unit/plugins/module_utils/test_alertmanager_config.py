"""Alertmanager configurations are checked before they are written, naming fields, never values."""

from ansible_collections.gpufleet.platform.plugins.module_utils.alertmanager import config_problems

GOOD = {
    "route": {"receiver": "oncall", "routes": [{"receiver": "pager", "matchers": ["severity=critical"]}]},
    "receivers": [
        {"name": "oncall", "slack_configs": [{"api_url": "https://hooks.example.invalid/s3cr3t"}]},
        {"name": "pager", "pagerduty_configs": [{"routing_key_file": "/etc/alertmanager/secrets/pd/key"}]},
    ],
}


def test_a_complete_configuration_and_none_pass():
    assert config_problems(GOOD, "v") == [] and config_problems({}, "v") == []


def test_a_notifier_without_its_credential_is_named_without_any_value():
    config = {**GOOD, "receivers": [GOOD["receivers"][0], {"name": "pager", "pagerduty_configs": [{}]}]}
    [problem] = config_problems(config, "v")
    assert problem.startswith("v.receivers[1].pagerduty_configs[0] (pager) has none of routing_key")
    assert "s3cr3t" not in problem


def test_routes_must_name_existing_receivers():
    config = {**GOOD, "route": {"receiver": "oncall", "routes": [{"receiver": "nobody"}]}}
    assert config_problems(config, "v") == ["v.route: receiver nobody is not in v.receivers"]
    assert "default receiver" in config_problems({"receivers": GOOD["receivers"]}, "v")[0]


def test_an_alert_is_named_with_where_it_is_and_its_summary():
    from ansible_collections.gpufleet.platform.plugins.module_utils.alertmanager import alert_summary

    alert = {
        "labels": {"alertname": "TargetDown", "job": "kubelet", "namespace": "kube-system", "severity": "warning"},
        "annotations": {"summary": "One or more targets are unreachable."},
        "state": "firing",
    }
    assert (
        alert_summary(alert) == "TargetDown (job=kubelet, namespace=kube-system): One or more targets are unreachable."
    )
    assert alert_summary({"labels": {"alertname": "Watchdog"}}) == "Watchdog"
