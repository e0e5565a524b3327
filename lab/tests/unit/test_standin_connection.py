"""The controller-cost benchmark's STAND-IN connection: a recording of one host's answers, replayed
for many with each host's own name filled in, by ansible-playbook itself; a command the recorded host
was never asked fails its task, naming it."""

import os
import subprocess
import sys
from pathlib import Path

import yaml
from gpufleet_lab import LAB_ROOT, REPO_ROOT
from gpufleet_lab import standin_answers as answers

BIN = Path(sys.executable).parent

WRAPPER = b"""#!/usr/bin/python3
def _ansiballz_main(): pass
if __name__ == "__main__":
    _ansiballz_main(
ansible_module='stat',
module_fqn='ansible.modules.stat',
params='{"ANSIBLE_MODULE_ARGS": {"path": "/etc/NAME.conf", "_ansible_tmpdir": "/root/.ansible/tmp/TMP"}}',
)
"""


def wrapper(name: str, tmp: str) -> bytes:
    return WRAPPER.replace(b"NAME", name.encode()).replace(b"TMP", tmp.encode())


def test_one_hosts_answer_is_the_others_with_their_names(tmp_path):
    real = answers.Asker("worker-gpu1", "10.213.7.242")
    stdout = b'{"stat": {"path": "/etc/worker-gpu1.conf", "exists": true}}'
    answers.record(
        tmp_path,
        "/bin/sh -c 'python3 && sleep 0'",
        wrapper("worker-gpu1", "ansible-tmp-1.5-10-20"),
        real,
        0,
        stdout,
        b"",
    )
    other = answers.Asker("gpu-00042", "10.128.0.42")
    rc, out, _ = answers.answer(
        tmp_path, "/bin/sh -c 'python3 && sleep 0'", wrapper("gpu-00042", "ansible-tmp-9.1-3-4"), other
    )
    assert (rc, out) == (0, b'{"stat": {"path": "/etc/gpu-00042.conf", "exists": true}}')


def test_a_temporary_folder_is_the_askers_own(tmp_path):
    real = answers.Asker("worker-gpu1", "10.213.7.242")
    cmd = "( umask 77 && mkdir -p ~/.ansible/tmp/ansible-tmp-1.5-10-20 ) && echo ansible-tmp-1.5-10-20=/root/x"
    answers.record(
        tmp_path, cmd, None, real, 0, b"ansible-tmp-1.5-10-20=/root/.ansible/tmp/ansible-tmp-1.5-10-20\n", b""
    )
    asked = cmd.replace("1.5-10-20", "7.25-99-1234")
    _, out, _ = answers.answer(tmp_path, asked, None, answers.Asker("gpu-00001", "10.128.0.1"))
    assert out == b"ansible-tmp-7.25-99-1234=/root/.ansible/tmp/ansible-tmp-7.25-99-1234\n"


def test_the_controller_and_the_host_are_asked_apart(tmp_path):
    answers.record(tmp_path, "hostname", None, answers.Asker("n", "10.0.0.1"), 0, b"n\n", b"")
    try:
        answers.answer(tmp_path, "hostname", None, answers.Asker("n", "", on_controller=True))
    except answers.NoAnswer as missing:
        assert "controller command hostname" in str(missing)
    else:
        raise AssertionError("the controller got the host's answer")


def test_ansible_playbook_replays_a_recording_for_many_hosts(tmp_path):
    """Recorded through the local recorder (tasks delegated to the controller), replayed by
    standin_replay for five hosts: each gets its own name back, and an unrecorded command fails."""
    recording = tmp_path / "recording"
    recording.mkdir()
    play = [{"hosts": "fleet", "gather_facts": False, "tasks": [
        {"name": "Ask", "ansible.builtin.command": "echo {{ inventory_hostname }} {{ extra | default('') }}",
         "delegate_to": "localhost", "register": "said", "changed_when": False},
        {"name": "Show", "ansible.builtin.debug": {"msg": "said={{ said.stdout }}"}},
    ]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))

    def run(hosts: list[str], connection: str, *extra: str) -> subprocess.CompletedProcess:
        controller = {"ansible_connection": connection, "ansible_python_interpreter": sys.executable}
        fleet = {host: {"ansible_host": "192.0.2.9"} for host in hosts}
        inventory = {"all": {"hosts": {"localhost": controller}, "children": {"fleet": {"hosts": fleet}}}}
        (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_CONNECTION_PLUGINS=str(LAB_ROOT / "plugins" / "connection"),
                   GPUFLEET_STANDIN_RECORDING=str(recording))  # fmt: skip
        command = [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), *extra]
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)

    recorded = run(["node-a"], "standin_record_local")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert list(recording.glob("*.json"))

    hosts = [f"gpu-{i:05d}" for i in range(1, 6)]
    replayed = run(hosts, "standin_replay")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    for host in hosts:
        assert f"said={host}" in replayed.stdout

    unrecorded = run(hosts[:1], "standin_replay", "-e", "extra=never-recorded")
    assert unrecorded.returncode != 0
    shown = " ".join(unrecorded.stdout.split())  # the display wraps the message
    assert "STAND-IN: the recording holds no answer to: 'controller module ansible.legacy.command" in shown
