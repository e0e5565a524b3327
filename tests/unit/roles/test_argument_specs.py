"""Every role option carries a constraint that keeps a malformed value out, and the roles check
values first, before anything that needs a host change, a cluster or a GPU (issue #17)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.platform.plugins.module_utils import validate

REPO = Path(__file__).resolve().parents[3]
SPECS = sorted([*REPO.glob("roles/*/meta/argument_specs.yml"), *REPO.glob("lab/roles/*/meta/argument_specs.yml")])


def options_of(spec_file: Path) -> dict[str, dict[str, Any]]:
    specs = yaml.safe_load(spec_file.read_text())["argument_specs"]
    return {name: spec for entry in specs.values() for name, spec in (entry.get("options") or {}).items()}


def walk(options: dict[str, dict[str, Any]], where: str = ""):
    for name, spec in options.items():
        yield f"{where}{name}", spec
        if isinstance(spec.get("options"), dict):
            yield from walk(spec["options"], f"{where}{name}.")


def constraint(spec: dict[str, Any]) -> str | None:
    """What keeps the option's value right, or None."""
    kind = spec.get("type", "str")
    if "choices" in spec:
        return "choices"
    if kind == "bool":
        return "type bool"
    if "check" in spec:
        return f"check {spec['check']}"
    if kind in ("dict", "list") and isinstance(spec.get("options"), dict):
        return "suboptions"
    return None


ALL_OPTIONS = [(f.parent.parent.name, name, spec) for f in SPECS for name, spec in walk(options_of(f))]


@pytest.mark.parametrize(("role", "name", "spec"), ALL_OPTIONS, ids=[f"{r}:{n}" for r, n, _ in ALL_OPTIONS])
def test_every_option_has_a_constraint(role, name, spec):
    assert constraint(spec), (
        f"{role}: option {name} ({spec.get('type', 'str')}) has no constraint: give it choices, suboptions or a"
        f" check: (one of {', '.join(sorted(validate.KINDS))}, a range such as 1..65535, or preflight)"
    )
    if spec.get("type") == "list" and spec.get("elements") == "dict":
        assert "options" in spec, f"{role}: {name} is a list of dicts without suboptions: a misspelt key goes unnamed"


# Ansible's own keys of an argument spec option, and the collection's `check`. ansible-lint's
# schema cannot know `check` (.ansible-lint-ignore), so this test stands in for it.
SPEC_KEYS = {"type", "elements", "default", "choices", "description", "required", "options", "no_log", "aliases",
             "version_added", "apply_defaults", "check"}  # fmt: skip


def test_options_use_known_keys_only():
    for role, name, spec in ALL_OPTIONS:
        assert set(spec) <= SPEC_KEYS, f"{role}: {name} has unknown keys {sorted(set(spec) - SPEC_KEYS)}"


def test_every_check_is_known():
    for _role, _name, spec in ALL_OPTIONS:
        if "check" in spec:
            validate.check_value(str(spec["check"]), None)  # raises on an unknown kind


def test_plain_defaults_pass_their_own_checks():
    for role, name, spec in ALL_OPTIONS:
        default = spec.get("default")
        if "check" in spec and default not in (None, "", [], {}) and "{{" not in str(default):
            items = default if spec.get("type") == "list" else [default]
            for item in items:
                assert validate.check_value(str(spec["check"]), item) is None, f"{role}: {name} default {item!r}"


@pytest.mark.parametrize("spec_file", SPECS, ids=[f.parent.parent.name for f in SPECS])
def test_values_are_checked_first(spec_file):
    role = spec_file.parent.parent
    # Each entry point's own task file; a role without `main` only lends task files (tasks_from).
    entries = yaml.safe_load(spec_file.read_text())["argument_specs"]
    for entry in ["main"] if "main" in entries else list(entries):
        first = yaml.safe_load((role / "tasks" / f"{entry}.yml").read_text())[0]
        if "module_defaults" in first:  # the cluster roles' block naming their kubeconfig: its first task
            first = first["block"][0]
        check = first.get("gpufleet.platform.check_values")
        assert check is not None, f"{role.name}: the first task of {entry} must be check_values"
        assert "always" in first.get("tags", []), f"{role.name}: check_values must run whatever --tags selects"
        assert entry == "main" or check.get("entry_point") == entry, f"{role.name}: {entry} checks another entry point"


@pytest.mark.parametrize("spec_file", SPECS, ids=[f.parent.parent.name for f in SPECS])
def test_preflight_checks_are_named_in_the_preflight(spec_file):
    role = spec_file.parent.parent
    # The tasks, and the role's own vars the preflight reads (telemetry_agent's credential by auth).
    tasks = "\n".join(p.read_text() for folder in ("tasks", "vars") for p in (role / folder).glob("*.yml"))
    for name, spec in walk(options_of(spec_file)):
        if str(spec.get("check")) == "preflight":
            top = name.split(".")[0]
            assert top in tasks, f"{role.name}: {name} says `check: preflight`, but no task of the role uses {top}"


def test_messages_name_the_variable_the_item_and_the_field():
    options = {
        "port": {"type": "int", "check": "1..65535"},
        "models": {
            "type": "list",
            "elements": "dict",
            "options": {"files": {"type": "list", "elements": "dict", "options": {"dest": {"check": "relative_path"}}}},
        },
        "token": {"type": "str", "check": "k8s_name", "no_log": True},
    }
    values = {"port": 0, "models": [{"files": [{"dest": "ok"}, {"dest": "/etc/passwd"}]}], "token": "hf_Secret"}
    problems = validate.check_options(options, values)
    assert problems == [
        "port=0 must be a number in 1-65535",
        "models[0].files[1].dest=/etc/passwd must be a relative path without .., inside the model directory",
        "token (value hidden) must be a Kubernetes object name (lower-case RFC 1123 subdomain)",
    ]


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        ("port", [1, 65535], [0, 65536, -1, True, "80"]),
        ("0 or 30000..32767", [0, 30000, 32767], [1, 29999, 32768]),
        ("0.01..1", [0.5, 1], [0, 1.5, 90]),
        ("host", ["10.0.0.1", "gpu-1.example.internal", "::1"], ["10.0.0.1:6443", "https://a", "a b", ""]),
        ("host_port", ["registry:5000", "[::1]:5000"], ["registry", "http://registry:5000", "r:0"]),
        ("url", ["https://a.b/c", "http://10.0.0.1:9000"], ["a.b/c", "ftp://a", "https://", "https://a:99999"]),
        ("absolute_path", ["/etc/x", "/a/../b"], ["etc/x", "~/x", ""]),
        ("service_user", ["gpufleet-tunnel", "svc_1"], ["root", "daemon", "www-data", "Tunnel", "a b", "-x"]),
        ("helm_release", ["monitoring"], ["Monitoring", "a" * 54, "a_b"]),
        ("k8s_namespace", ["gpu-operator"], ["gpu.operator", "GPU", "a" * 64]),
        ("labels", [{"release": "monitoring", "nvidia.com/gpu.present": "true"}], [{"a/b/c": "x"}, {"k": "a b"}]),
        ("taint", ["nvidia.com/gpu=present:NoSchedule", "gpu:NoExecute"], ["gpu=present", "gpu:Never"]),
        ("version", ["1.17.8", "v25.3.4", "v1.33.5+k3s1"], ["latest", "1", "v25"]),
        ("s3_uri", ["s3://bucket/p", "s3://https://minio:9000/bucket/p"], ["https://bucket/p", "s3://"]),
        ("relative_path", ["1/model.py"], ["/etc/x", "../x", "1/../../x"]),
    ],
)
def test_kinds(check, good, bad):
    for value in good:
        assert validate.check_value(check, value) is None, (check, value)
    for value in bad:
        assert validate.check_value(check, value), (check, value)


# A role's argument spec cannot include another's, so every role that schedules pods spells out
# Kubernetes' toleration. They must stay one schema: the same fields, types, choices and checks.
TOLERATIONS = {f"{role}:{name}": spec for role, name, spec in ALL_OPTIONS if name.endswith("_tolerations")}


def without_descriptions(spec: Any) -> Any:
    if isinstance(spec, dict):
        return {k: without_descriptions(v) for k, v in spec.items() if k != "description"}
    return spec


def test_every_tolerations_option_is_the_same_schema():
    assert len(TOLERATIONS) >= 4, sorted(TOLERATIONS)  # dcgm_exporter, monitoring, telemetry_agent, vllm
    schemas = {name: without_descriptions(spec["options"]) for name, spec in TOLERATIONS.items()}
    first, *rest = schemas
    for name in rest:
        assert schemas[name] == schemas[first], f"{name} differs from {first}"
    assert set(schemas[first]) == {"key", "operator", "value", "effect", "tolerationSeconds"}
    # The API server's rules between the fields (validateTolerations) are one check, on every one.
    assert {spec.get("check") for spec in TOLERATIONS.values()} == {"toleration"}
