"""STAND-IN answers for Ansible's connection: what one real host answered, replayed for many.

The controller-cost benchmark (benchmarks/controller_scale.py) measures Ansible's own work
(inventory, templating, strategy, callbacks, fact cache) at thousands of hosts, which no lab here
can start. It records what one converged lab node answers to every command and module of the node
plays in check mode, then gives thousands of inventory hosts a connection, `standin_replay`, that
answers each command from that recording: the controller takes the same branches for each of them
as for the real node, and no host process runs.

A command's key is what it asks, with what differs between hosts and runs taken out: the host's name
and address, Ansible's random temporary folder names, and the `_ansible_*` settings a module gets
beside its arguments. The answer is stored with the same placeholders and filled in with the asking
host's own name, address and folders.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from gpufleet_lab import REPO_ROOT

# A pipelined module: the AnsiballZ wrapper ends with its module name and parameters as literals.
_MODULE = re.compile(rb"^ansible_module=(.*),$", re.M)
_PARAMS = re.compile(rb"^params=(.*),$", re.M)
# Ansible's temporary folder: ansible-tmp-<time>-<pid>-<random>.
_TMP = re.compile(r"ansible-tmp-[0-9.]+-[0-9]+-[0-9]+")
HOST, ADDR, CHECKOUT = "@STANDIN_HOST@", "@STANDIN_ADDR@", "@STANDIN_CHECKOUT@"
METADATA = "recording.json"
# Arguments an action plugin makes up on each call: the template action's local temporary file name.
RANDOM_ARGS = frozenset({"_original_basename"})


@dataclass(frozen=True)
class Asker:
    """The host a command is for: its inventory name and address, and whether the command runs on the
    controller (a task delegated to localhost) or on the host."""

    name: str
    address: str
    on_controller: bool = False

    @property
    def where(self) -> str:
        return "controller" if self.on_controller else "host"

    def hide(self, text: str) -> str:
        text = text.replace(str(REPO_ROOT), CHECKOUT)  # a recording made in one checkout replays in another
        # Whole names only: "n" is no part of "hostname", though "/etc/n.conf" names host n.
        text = re.sub(rf"(?<![\w-]){re.escape(self.name)}(?![\w-])", HOST, text)
        return re.sub(rf"(?<![\d.]){re.escape(self.address)}(?!\d)", ADDR, text) if self.address else text

    def show(self, text: str) -> str:
        return text.replace(HOST, self.name).replace(ADDR, self.address).replace(CHECKOUT, str(REPO_ROOT))


def key_of(cmd: str, in_data: bytes | None, asker: Asker) -> tuple[str, list[str]]:
    """The key of one command (and its temporary folders, in order, to fill into the answer)."""
    folders = list(dict.fromkeys(_TMP.findall(cmd)))
    if in_data:
        module, params = _MODULE.search(in_data), _PARAMS.search(in_data)
        if module and params:
            args = json.loads(ast.literal_eval(params.group(1).decode()))["ANSIBLE_MODULE_ARGS"]
            kept = {k: v for k, v in args.items() if not k.startswith("_ansible_") and k not in RANDOM_ARGS}
            text = json.dumps(kept, sort_keys=True, default=str)
            folders += [f for f in dict.fromkeys(_TMP.findall(text)) if f not in folders]
            name = ast.literal_eval(module.group(1).decode())
            return f"{asker.where} module {name} {_hide(text, folders, asker)}", folders
    return f"{asker.where} command {_hide(cmd, folders, asker)}", folders


def _hide(text: str, folders: list[str], asker: Asker) -> str:
    for i, folder in enumerate(folders):
        text = text.replace(folder, f"@STANDIN_TMP{i}@")
    return asker.hide(text)


def _show(text: str, folders: list[str], asker: Asker) -> str:
    for i, folder in enumerate(folders):
        text = text.replace(f"@STANDIN_TMP{i}@", folder)
    return asker.show(text)


def _file(recording: Path, key: str) -> Path:
    return recording / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def record(
    recording: Path, cmd: str, in_data: bytes | None, asker: Asker, rc: int, stdout: bytes, stderr: bytes
) -> None:
    """Keep the first answer to each key (a check run asks the same twice only where nothing changed)."""
    key, folders = key_of(cmd, in_data, asker)
    path = _file(recording, key)
    if path.exists():
        return
    answer = {"key": key, "rc": rc,
              "stdout": _hide(stdout.decode(errors="replace"), folders, asker),
              "stderr": _hide(stderr.decode(errors="replace"), folders, asker)}  # fmt: skip
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(answer))
    tmp.replace(path)


class NoAnswer(KeyError):
    """The recording holds no answer to this command: the replayed host asked what the real one did not."""


def answer(recording: Path, cmd: str, in_data: bytes | None, asker: Asker) -> tuple[int, bytes, bytes]:
    key, folders = key_of(cmd, in_data, asker)
    try:
        found = json.loads(_file(recording, key).read_text())
    except FileNotFoundError:
        raise NoAnswer(key[:300]) from None
    return (found["rc"], _show(found["stdout"], folders, asker).encode(),
            _show(found["stderr"], folders, asker).encode())  # fmt: skip
