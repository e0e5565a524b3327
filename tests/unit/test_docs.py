"""The generated docs follow their sources: each role's README its argument specs, the changelog its
fragments; the README links only to pages that exist."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_each_role_s_readme_is_what_its_argument_specs_give():
    run = subprocess.run([sys.executable, str(REPO / "scripts/role-readmes.py"), "--check"], capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr


def test_every_role_has_a_readme():
    roles = [r for r in (REPO / "roles").iterdir() if r.is_dir()]
    assert [r.name for r in roles if not (r / "README.md").is_file()] == []


def test_the_changelog_and_its_fragments_pass_antsibull_changelog_s_lint():
    run = subprocess.run([str(BIN / "antsibull-changelog"), "lint"], cwd=REPO, capture_output=True, text=True,
                         check=False)  # fmt: skip
    assert run.returncode == 0 and not run.stdout.strip(), run.stdout + run.stderr


def test_the_readme_and_docs_link_only_to_files_that_exist():
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.relative_to(REPO)} links to {target}"


def test_one_version_for_the_collection_the_cli_and_the_lab():
    galaxy = re.search(r"^version: (\S+)$", (REPO / "galaxy.yml").read_text(), re.M)
    for pyproject in (REPO / "pyproject.toml", REPO / "lab/pyproject.toml"):
        assert galaxy and f'version = "{galaxy[1]}"' in pyproject.read_text(), pyproject
