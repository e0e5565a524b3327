"""The monitoring role's alert rules: valid for Prometheus, and every alert unit-tested with promtool."""

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
RULES = sorted((ROOT / "roles/monitoring/files/rules").glob("*.rules.yml"))
TESTS = sorted((ROOT / "tests/promtool").glob("*.test.yml"))


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=ROOT)


def test_rule_files_are_valid():
    proc = promtool("check", "rules", *map(str, RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_unit_tests_pass():
    proc = promtool("test", "rules", *map(str, TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_alert_has_a_test_where_it_fires():
    alerts = {
        rule["alert"]
        for path in RULES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    fired = {
        case["alertname"]
        for path in TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert len(alerts) >= 13
    assert alerts - fired == set()


def test_verify_expects_every_group_the_role_applies():
    """`gpufleet verify` checks that Prometheus loaded these groups: the list must follow the files."""
    listed = yaml.safe_load((ROOT / "roles/fleet_defaults/defaults/main.yml").read_text())["gpufleet_alert_rule_groups"]
    applied = [group["name"] for path in RULES for group in yaml.safe_load(path.read_text())["groups"]]
    assert sorted(listed) == sorted(applied)
