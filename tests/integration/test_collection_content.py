"""The built collection holds the product and nothing else: galaxy.yml's manifest is an allow-list,
and this lists the built archive against what a user of gpufleet.platform installs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
# What a collection user gets: the playbooks and their roles and plugins, the example inventory, the
# docs, the changelog and the Containerfiles of the images users build (images/). Anything else in the
# archive (tests, molecule scenarios, the lab, the CLI's Python package, the harness) is a leak.
PRODUCT = re.compile(
    r"(MANIFEST|FILES)\.json|README\.md|CHANGELOG\.md|site\.yml|meta/runtime\.yml"
    r"|changelogs/(changelog|config)\.yaml|docs/.+\.(md|rst|png|svg)|inventories/prod/.+\.yml(\.example)?|playbooks/[a-z0-9_]+\.yml"
    r"|plugins/(action|doc_fragments|filter|modules|module_utils|test)/([a-z0-9_]+/)?[a-z0-9_]+\.py"
    r"|plugins/(filter|test)/[a-z0-9_]+\.yml"
    r"|roles/[a-z0-9_]+/(README\.md|(defaults|files|handlers|meta|tasks|templates|vars)/.+)"
    r"|images/[a-z0-9-]+/Containerfile"
    r"|extensions/eda/rulebooks/[a-z0-9_]+\.yml"
)


BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("collection")
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(REPO_ROOT)],
                   check=True, capture_output=True)  # fmt: skip
    (tarball,) = out.glob("gpufleet-platform-*.tar.gz")
    return tarball


@pytest.fixture(scope="module")
def archive(built: Path) -> set[str]:
    with tarfile.open(built) as tar:
        return {member.name for member in tar.getmembers() if member.isfile()}


def tracked(*paths: str) -> set[str]:
    listed = subprocess.run(["git", "ls-files", *paths], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return set(listed.stdout.split())


def test_it_holds_nothing_but_the_product(archive: set[str]) -> None:
    leaks = sorted(name for name in archive if not PRODUCT.fullmatch(name))
    assert not leaks, f"not product, yet in the built collection: {leaks}"


def test_it_holds_every_role_plugin_and_playbook(archive: set[str]) -> None:
    tracked_product = tracked("roles", "plugins", "playbooks", "images", "extensions", "site.yml")
    product = {name for name in tracked_product if "/molecule/" not in name}
    assert product - archive == set(), "product files missing from the built collection"


def test_the_lab_and_the_tests_stay_out(archive: set[str]) -> None:
    for outside in ("lab/", "tests/", "molecule/", "src/", "scripts/", "benchmarks/", "inventories/lab"):
        assert not any(name.startswith(outside) for name in archive), outside
    assert not any("/molecule/" in name for name in archive)


# What a user of the installed collection finds with ansible-doc: every module, filter and test,
# each with its documentation (a plugin whose docs do not load is listed without a description).
PLUGIN_DOCS = {"module": ("modules", "*.py"), "filter": ("filter", "*.yml"), "test": ("test", "*.yml")}


@pytest.fixture(scope="module")
def installed(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("installed")
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force", "-p",
                    str(target), str(built)], check=True, capture_output=True)  # fmt: skip
    return target


@pytest.mark.parametrize("kind", sorted(PLUGIN_DOCS))
def test_ansible_doc_finds_every_plugin_of_the_installed_collection(installed: Path, kind: str) -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(installed)}
    listed = subprocess.run([str(BIN / "ansible-doc"), "-t", kind, "--list", "--json", "gpufleet.platform"],
                            env=env, capture_output=True, text=True)  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    found = json.loads(listed.stdout)
    folder, pattern = PLUGIN_DOCS[kind]
    wanted = {f"gpufleet.platform.{p.stem}" for p in (REPO_ROOT / "plugins" / folder).glob(pattern)}
    assert wanted and wanted <= set(found), sorted(wanted - set(found))
    undocumented = sorted(name for name in wanted if not found[name])
    assert not undocumented, f"listed without a description: {undocumented}"


def test_the_rulebook_is_found_by_its_name_in_the_installed_collection(built: Path, tmp_path: Path) -> None:
    """ansible-rulebook finds `--rulebook gpufleet.platform.gpu_remediation` in an installed collection's
    extensions/eda/rulebooks, and its playbook as gpufleet.platform.gpu_remediation."""
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--force", "-p", str(tmp_path),
                    str(built)],
                   check=True, capture_output=True)  # fmt: skip
    root = tmp_path / "ansible_collections/gpufleet/platform"
    rulebook = yaml.safe_load((root / "extensions/eda/rulebooks/gpu_remediation.yml").read_text())
    [action] = [rule["action"] for ruleset in rulebook for rule in ruleset["rules"]]
    assert action["run_playbook"]["name"] == "gpufleet.platform.gpu_remediation"
    assert (root / "playbooks/gpu_remediation.yml").is_file()
