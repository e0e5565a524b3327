# The controller's half of a STAND-IN recording (benchmarks/controller_scale.py): the local
# connection, unchanged, keeping each answer for the standin_replay connection. The hosts' half is
# lab/scripts/standin-ssh-recorder, in ssh's place.
from __future__ import annotations

DOCUMENTATION = """
    name: standin_record_local
    short_description: The local connection, keeping each answer for gpufleet's STAND-IN replay
    description:
      - For gpufleet's controller-cost benchmark only. Runs tasks on the controller as the local
        connection does and records each command's answer for the standin_replay connection.
    author: gpufleet
    options:
      recording:
        description: The folder the answers go to.
        type: path
        required: true
        vars: [{name: gpufleet_standin_recording}]
        env: [{name: GPUFLEET_STANDIN_RECORDING}]
      standin_host:
        description: The inventory name of the host the command is for.
        type: str
        vars: [{name: inventory_hostname}]
"""

from pathlib import Path

from ansible.plugins.connection.local import Connection as Local
from gpufleet_lab import standin_answers


class Connection(Local):
    transport = "standin_record_local"
    always_pipeline_modules = True  # as the replay, and as ansible.cfg's ssh: the module comes with the command

    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = True) -> tuple[int, bytes, bytes]:
        rc, stdout, stderr = super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        asker = standin_answers.Asker(self.get_option("standin_host"), "", on_controller=True)
        standin_answers.record(Path(self.get_option("recording")), cmd, in_data, asker, rc, stdout, stderr)
        return rc, stdout, stderr
