"""ansible-playbook's options on `gpufleet up|plan|verify`: each reaches a real ansible-runner run with
ansible-playbook's meaning (read back from what the play itself saw), and the run's summary shows it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.constants import DEFAULT_VAULT_ID_MATCH
from ansible.parsing.vault import VaultLib, VaultSecret

from gpufleet import cli, runner

VAULT_PASSWORD = "correct horse battery"  # pragma: allowlist secret (a test's own vault)
VAULTED = "s3cret"  # pragma: allowlist secret (what that vault holds)
SEEN = {
    "check": "{{ ansible_check_mode }}",
    "diff": "{{ ansible_diff_mode }}",
    "verbosity": "{{ ansible_verbosity }}",
    "forks": "{{ ansible_forks }}",
    "run_tags": "{{ ansible_run_tags }}",
    "skip_tags": "{{ ansible_skip_tags }}",
    "limit": "{{ ansible_limit | default('') }}",
    "greeting": "{{ greeting | default('') }}",
    "from_file": "{{ from_file | default('') }}",
    "secret": "{{ secret | default('') }}",
    "user": "{{ ansible_user | default('') }}",
}
PLAYBOOK = [
    {
        "name": "What the play sees",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [
            {"name": "first", "ansible.builtin.debug": {"msg": SEEN}, "tags": ["first"]},
            {"name": "second", "ansible.builtin.debug": {"msg": "second"}, "tags": ["second"]},
        ],
    }
]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(runner, "collection_dir", lambda: tmp_path)
    monkeypatch.setattr(runner, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.delenv("ANSIBLE_INVENTORY", raising=False)
    (tmp_path / "site.yml").write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False))
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "verify.yml").write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "inventory" / "group_vars").mkdir(parents=True)
    (tmp_path / "inventory" / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"a": local, "b": local}}}))
    (tmp_path / "vars.yml").write_text("from_file: from the file\n")
    return tmp_path


@pytest.fixture
def vaulted(project) -> Path:
    """The inventory holds a vault-encrypted value, as the README's real-fleet path has it."""
    encrypted = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(VAULT_PASSWORD.encode()))]).encrypt(VAULTED).decode()
    (project / "inventory" / "group_vars" / "all.yml").write_text(
        "secret: !vault |\n  " + encrypted.strip().replace("\n", "\n  ") + "\n"
    )
    (project / "vault-pass").write_text(VAULT_PASSWORD + "\n")
    return project


def run(project: Path, capsys, *argv: str, command: str = "up") -> tuple[int, dict[str, Any], dict[str, Any]]:
    """gpufleet COMMAND -i INVENTORY ARGV: its exit code, its JSON summary, and what host a's first task saw."""
    code = cli.main(["--json", command, "-i", str(project / "inventory"), *argv])
    summary = json.loads(capsys.readouterr().out)
    seen: dict[str, Any] = {}
    for event in sorted((Path(summary["run_dir"]) / "job_events").glob("*.json")):
        data = json.loads(event.read_text()).get("event_data", {})
        if data.get("task") == "first" and data.get("host") == "a" and "res" in data:
            seen = data["res"]["msg"]
    return code, summary, seen


def ran_tasks(summary: dict[str, Any]) -> set[str]:
    names = set()
    for event in (Path(summary["run_dir"]) / "job_events").glob("*.json"):
        data = json.loads(event.read_text())
        if data.get("event") == "runner_on_ok":
            names.add(data["event_data"]["task"])
    return names


def test_extra_vars_inline_and_from_a_file_relative_to_the_callers_folder(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, summary, seen = run(project, capsys, "-e", "greeting=hello", "--extra-vars", "@vars.yml")
    assert code == 0
    assert seen["greeting"] == "hello" and seen["from_file"] == "from the file"
    # The summary names the variables an inline -e sets, never their values; a file shows as given.
    assert "<greeting>" in summary["options"] and f"@{project / 'vars.yml'}" in summary["options"]
    assert "hello" not in json.dumps(summary["options"])


def test_vault_password_file_decrypts_the_inventorys_vault(vaulted, capsys):
    code, _, seen = run(vaulted, capsys, "--vault-password-file", str(vaulted / "vault-pass"))
    assert code == 0 and seen["secret"] == VAULTED


def test_vault_id_with_a_file(vaulted, capsys):
    code, summary, seen = run(vaulted, capsys, "--vault-id", f"default@{vaulted / 'vault-pass'}")
    assert code == 0 and seen["secret"] == VAULTED
    assert "--vault-id" in summary["options"]


def test_ask_vault_pass_answers_ansible_playbooks_prompt_from_memory(vaulted, capsys, monkeypatch):
    asked = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: asked.append(prompt) or VAULT_PASSWORD)
    code, _, seen = run(vaulted, capsys, "--ask-vault-pass")
    assert code == 0 and seen["secret"] == VAULTED
    assert asked == ["Vault password: "]
    # The password is in no file of the run (ansible-runner's pexpect loop answered from memory).
    assert not any(
        VAULT_PASSWORD in p.read_text(errors="replace") for p in (vaulted / "runs").rglob("*") if p.is_file()
    )


def test_without_the_vault_password_the_run_fails_and_names_the_cause(vaulted, capsys):
    code, summary, _ = run(vaulted, capsys)
    assert code == cli.EXIT_FAILED
    assert summary["rc"] != 0


@pytest.mark.parametrize("flags, expected", [(["-v"], 1), (["-vvv"], 3), (["-v", "-v", "-v", "-v"], 4)])
def test_verbosity(project, capsys, flags, expected):
    code, summary, seen = run(project, capsys, *flags)
    assert code == 0 and int(seen["verbosity"]) == expected
    assert "-" + "v" * expected in summary["options"]


def test_forks(project, capsys):
    code, _, seen = run(project, capsys, "--forks", "3")
    assert code == 0 and int(seen["forks"]) == 3


def test_forks_of_zero_is_a_usage_error(project):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["up", "-i", str(project / "inventory"), "--forks", "0"])
    assert exit_.value.code == cli.EXIT_USAGE


def test_diff_and_check(project, capsys):
    code, _, seen = run(project, capsys, "--diff")
    assert code == 0 and seen["diff"] is True and seen["check"] is False
    code, _, seen = run(project, capsys, "--check")
    assert code == 0 and seen["check"] is True and seen["diff"] is True  # a dry run shows what it would change


def test_limit_selects_hosts(project, capsys):
    code, summary, seen = run(project, capsys, "--limit", "a")
    assert code == 0 and set(summary["hosts"]) == {"a"} and seen["limit"] == "a"


def test_tags_and_skip_tags(project, capsys):
    code, summary, seen = run(project, capsys, "--tags", "first")
    assert code == 0 and ran_tasks(summary) == {"first"} and seen["run_tags"] == ["first"]
    code, summary, seen = run(project, capsys, "--skip-tags", "first")
    assert code == 0 and ran_tasks(summary) == {"second"}
    assert "--skip-tags" in summary["options"]


def test_start_at_task(project, capsys):
    code, summary, _ = run(project, capsys, "--start-at-task", "second")
    assert code == 0 and ran_tasks(summary) == {"second"}


def test_user_and_become_options_reach_the_play(project, capsys):
    code, summary, seen = run(project, capsys, "-u", "deploy", "--become", "--become-method", "su",
                              "--become-user", "nobody", "--check")  # fmt: skip
    assert code == 0 and seen["user"] == "deploy"
    # The play's connection is local (become needs a real escalation to show itself): ansible-runner's
    # own record of the command it ran carries them.
    ran = json.loads((Path(summary["run_dir"]) / "command").read_text())["command"]
    assert ran[ran.index("--become-method") + 1] == "su" and "--become" in ran
    options = summary["options"]
    for flag, value in (("--user", "deploy"), ("--become-method", "su"), ("--become-user", "nobody")):
        assert options[options.index(flag) + 1] == value
    assert "--become" in options


def test_ask_become_pass_is_asked_once_before_the_run(project, capsys, monkeypatch):
    asked = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: asked.append(prompt) or "pw")
    code, summary, _ = run(project, capsys, "--ask-become-pass")
    assert code == 0 and asked == ["BECOME password: "]
    assert "--ask-become-pass" in summary["options"]


def test_the_options_are_shown_in_the_run_summary(project, capsys):
    code = cli.main(["up", "-i", str(project / "inventory"), "--limit", "a", "-e", "greeting=hi", "-vv"])
    assert code == 0
    assert "options: --limit a --extra-vars '<greeting>' -vv" in capsys.readouterr().err


def test_verify_and_plan_take_the_same_options(project, capsys):
    code, _, seen = run(project, capsys, "-e", "greeting=hi", command="verify")
    assert code == 0 and seen["greeting"] == "hi"
    code, _, seen = run(project, capsys, "-e", "greeting=hi", command="plan")
    assert code == 0 and seen["check"] is True


def test_without_an_inventory_the_lab_is_never_taken_in_silence(project, capsys):
    assert cli.main(["up"]) == cli.EXIT_USAGE
    said = capsys.readouterr().err
    assert "no inventory: give -i INVENTORY" in said and "ANSIBLE_INVENTORY" in said


def test_ansible_inventory_is_used_and_said_aloud(project, capsys, monkeypatch):
    monkeypatch.setenv("ANSIBLE_INVENTORY", str(project / "inventory"))
    code = cli.main(["up"])
    assert code == 0
    assert f"inventory {project / 'inventory'} (from ANSIBLE_INVENTORY" in capsys.readouterr().err
