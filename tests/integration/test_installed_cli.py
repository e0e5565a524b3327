"""The CLI installed as a package (not run from a checkout) runs the playbooks of the collection
installed where ansible keeps collections: what a user gets from `pip install gpufleet` and
`ansible-galaxy collection install gpufleet.platform`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

PROBE = """
import json, sys
from pathlib import Path
import gpufleet
from gpufleet import runner
root = runner.collection_dir()
tasks = runner.planned_tasks("site.yml", root / "inventories/prod/hosts.yml")
print(json.dumps({"package": gpufleet.__file__, "collection": str(root), "tasks": tasks}))
"""


def test_an_installed_cli_runs_the_installed_collection_s_playbooks(tmp_path: Path) -> None:
    site, collections, work = tmp_path / "site", tmp_path / "collections", tmp_path / "work"
    work.mkdir()
    quiet = {"check": True, "capture_output": True}
    subprocess.run([str(BIN / "pip"), "install", "-q", "--no-deps", "--target", str(site),
                    str(REPO_ROOT)], **quiet)  # fmt: skip
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path),
                    str(REPO_ROOT)], **quiet)  # fmt: skip
    (built,) = tmp_path.glob("gpufleet-platform-*.tar.gz")
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force", "-p",
                    str(collections), str(built)], **quiet)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(site), "ANSIBLE_COLLECTIONS_PATH": str(collections),
           "GPUFLEET_RUNS_DIR": str(work / "runs")}  # fmt: skip
    env.pop("ANSIBLE_CONFIG", None)
    env.pop("GPUFLEET_COLLECTION_DIR", None)
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=work, env=env, text=True, capture_output=True)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout.splitlines()[-1])
    assert Path(found["package"]).is_relative_to(site), "the probe ran the checkout's package"
    assert found["collection"] == str((collections / "ansible_collections/gpufleet/platform").resolve())
    # site.yml's roles resolved by FQCN from the installed collection: tasks listed for the fleet's hosts.
    assert found["tasks"] and all(count > 0 for count in found["tasks"].values()), probe.stderr[-2000:]
