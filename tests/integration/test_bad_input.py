"""The bad-input corpus (tests/badinput/cases.yml): every malformed value stops its role at
argument validation or a preflight check, before any task that changes something, with a
message naming the variable.

All cases run in one ansible-runner run (one block per case, its failure rescued and
recorded), in check mode as a safety net: should a case ever get past its checks, it
could still change nothing on the machine running the tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml

from gpufleet import runner

REPO_ROOT = Path(__file__).resolve().parents[2]

CASES = yaml.safe_load((REPO_ROOT / "tests/badinput/cases.yml").read_text())
RESULT_TASK = "Report the corpus results"


RECORD_REFUSAL = (
    "{{ __results | combine({__case: {'task': ansible_failed_task.name,"
    " 'msg': ansible_failed_result.msg | default('') | string}}) }}"
)


def case_block(case: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": f"case {case['id']}",
        "vars": {"__case": case["id"]},
        "block": [
            {
                "name": f"apply {case['role']}",
                "ansible.builtin.include_role": {
                    # The lab's roles are not in the collection: found by their short names (ANSIBLE_ROLES_PATH).
                    "name": case["role"] if case["role"].startswith("lab_") else f"gpufleet.platform.{case['role']}",
                    "tasks_from": case.get("tasks_from", "main"),
                },
                "vars": case["vars"],
            },
            {
                "name": "not refused",
                "ansible.builtin.set_fact": {"__results": "{{ __results | combine({__case: None}) }}"},
            },
        ],
        "rescue": [{"name": "record the refusal", "ansible.builtin.set_fact": {"__results": RECORD_REFUSAL}}],
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("badinput")
    playbook = [
        {
            "name": "Bad-input corpus",
            "hosts": "localhost",
            "gather_facts": True,
            "vars": {"__results": {}},
            "tasks": [*map(case_block, CASES), {"name": RESULT_TASK, "ansible.builtin.debug": {"var": "__results"}}],
        }
    ]
    (work / "corpus.yml").write_text(yaml.safe_dump(playbook, sort_keys=False))
    inventory = {
        "all": {
            "hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
            # Never contacted: every case stops before a GPU node is reached.
            "children": {"gpu_nodes": {"hosts": {"gpu1": {"ansible_host": "192.0.2.1"}}}},
        }
    }
    (work / "hosts.yml").write_text(yaml.safe_dump(inventory))
    seen: dict[str, Any] = {"changed": [], "results": None}

    def on_event(event: dict[str, Any]) -> None:
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("res", {}).get("changed") and data.get("role"):
            seen["changed"].append(f"{data['role']}: {data['task']}")
        if event.get("event") == "runner_on_ok" and data.get("task") == RESULT_TASK:
            seen["results"] = data["res"]["__results"]

    (work / "runner").mkdir()
    result = ansible_runner.run(
        private_data_dir=str(work / "runner"), project_dir=str(REPO_ROOT), playbook=str(work / "corpus.yml"),
        inventory=str(work / "hosts.yml"), cmdline="--check", quiet=True, event_handler=on_event,
        envvars={**runner.ansible_env(), "ANSIBLE_COLLECTIONS_PATH": str(REPO_ROOT / "collections"),
                 "ANSIBLE_ROLES_PATH": str(REPO_ROOT / "lab" / "roles")},
    )  # fmt: skip
    assert result.rc == 0, result.stdout.read()[-3000:]
    assert seen["results"] is not None
    return seen


def test_the_corpus_is_large_and_covers_every_role_with_inputs():
    roles = {case["role"] for case in CASES}
    assert len(CASES) >= 40
    assert len({case["id"] for case in CASES}) == len(CASES)
    specs = [*REPO_ROOT.glob("roles/*/meta/argument_specs.yml"), *REPO_ROOT.glob("lab/roles/*/meta/argument_specs.yml")]
    with_inputs = {p.parent.parent.name for p in specs} - {"versions"}
    assert with_inputs <= roles, with_inputs - roles


def test_no_case_got_as_far_as_a_change(outcomes):
    assert outcomes["changed"] == []


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_early_with_the_variable_named(outcomes, case):
    outcome = outcomes["results"].get(case["id"])
    assert outcome is not None, f"{case['id']}: the role accepted {case['vars']}"
    # Refused by the argument spec or a preflight check, which every role runs first.
    assert outcome["task"].startswith(("Validating arguments", "Preflight")), outcome
    message = " ".join(outcome["msg"].split())
    for expected in case["expect"]:
        assert expected in message, f"{case['id']}: {expected!r} not in {message!r}"
    for secret in case.get("absent", []):
        assert secret not in outcome["msg"], f"{case['id']}: the message shows {secret!r}"
