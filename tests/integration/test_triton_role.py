"""The triton role stops on a config outside Triton's schema before it writes any file."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

PLAYBOOK = Path(__file__).parent / "playbooks" / "triton_bad_config.yml"


def test_bad_config_fails_before_anything_is_written(tmp_path):
    repository = tmp_path / "models"
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(PLAYBOOK),
            "-e",
            f"repository={repository}",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        env={"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin", "ANSIBLE_FORCE_COLOR": "0"},
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "model bad" in output and "TYPE_FP33" in output
    assert not repository.exists()  # not even the valid model's directory
