# STAND-IN connection of the controller-cost benchmark (benchmarks/controller_scale.py): no host
# runs anything; each command is answered with what one real lab node answered to it
# (gpufleet_lab.standin_answers).
from __future__ import annotations

DOCUMENTATION = """
    name: standin_replay
    short_description: STAND-IN connection that answers every command from a recording of a real host
    description:
      - For gpufleet's controller-cost benchmark only. Each command and module is answered with what one
        real lab node answered to it (recorded by the benchmark), with the asking host's name, address
        and temporary folders filled in, so Ansible's controller does all its own work for thousands of
        hosts and no host process runs.
      - A command the real node was never asked fails the task, naming it.
    author: gpufleet
    options:
      recording:
        description: The folder of recorded answers.
        type: path
        required: true
        vars: [{name: gpufleet_standin_recording}]
        env: [{name: GPUFLEET_STANDIN_RECORDING}]
      standin_host:
        description: The inventory name of the host the command is for.
        type: str
        vars: [{name: inventory_hostname}]
      remote_addr:
        description: The host's address.
        type: str
        default: inventory_hostname
        vars: [{name: inventory_hostname}, {name: ansible_host}]
"""

from pathlib import Path

from ansible.errors import AnsibleError
from ansible.plugins.connection import ConnectionBase
from gpufleet_lab import standin_answers

CONTROLLER = ("localhost", "127.0.0.1")


class Connection(ConnectionBase):
    transport = "standin_replay"
    has_pipelining = True
    always_pipeline_modules = True  # the module and its parameters arrive with the command

    def _connect(self) -> Connection:
        self._connected = True
        return self

    def _asker(self) -> standin_answers.Asker:
        address = self.get_option("remote_addr")
        if address in CONTROLLER:  # a task delegated to the controller
            return standin_answers.Asker(self.get_option("standin_host"), "", on_controller=True)
        return standin_answers.Asker(self.get_option("standin_host"), address)

    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = True) -> tuple[int, bytes, bytes]:
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        try:
            return standin_answers.answer(Path(self.get_option("recording")), cmd, in_data, self._asker())
        except standin_answers.NoAnswer as missing:
            raise AnsibleError(f"STAND-IN: the recording holds no answer to: {missing}") from None

    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path: str, out_path: str) -> None:
        raise AnsibleError(f"STAND-IN: no file to fetch from a replayed host ({in_path})")

    def close(self) -> None:
        self._connected = False
