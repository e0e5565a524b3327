#!/usr/bin/env python3
"""Lint every plugin's and role's documentation as antsibull-docs, the Ansible docsite's builder,
reads it (`antsibull-docs lint-collection-docs --plugin-docs`).

Its role schema forbids keys it does not know, and each option's `check:` (the collection's value
constraint, plugins/module_utils/validate.py) is one: the lint reads a copy of the collection whose
argument specs lack it. tests/unit/roles/test_argument_specs.py checks those keys instead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def without_checks(options: dict[str, Any]) -> None:
    for spec in options.values():
        spec.pop("check", None)
        without_checks(spec.get("options") or {})


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ansible_collections" / "gpufleet" / "platform"
        listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
        files = subprocess.run(listed, cwd=REPO, capture_output=True, text=True, check=True).stdout
        for name in files.splitlines():
            if name.startswith(("galaxy.yml", "meta/", "plugins/", "roles/")):
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, copy / name)
        for spec_file in copy.glob("roles/*/meta/argument_specs.yml"):
            specs = yaml.safe_load(spec_file.read_text())
            for entry in specs["argument_specs"].values():
                without_checks(entry.get("options") or {})
            spec_file.write_text(yaml.safe_dump(specs, sort_keys=False))
        return subprocess.run(["antsibull-docs", "lint-collection-docs", "--plugin-docs", str(copy)]).returncode


if __name__ == "__main__":
    sys.exit(main())
