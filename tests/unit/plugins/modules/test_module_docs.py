"""Every module's DOCUMENTATION, EXAMPLES and RETURN are YAML that ansible-doc can read, and the
documented options are the ones the module takes (caught here, not at the collection build)."""

import ast
from pathlib import Path

import pytest
import yaml

MODULES = sorted((Path(__file__).resolve().parents[4] / "plugins" / "modules").glob("*.py"))


def docs(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_docs_parse_and_name_the_module_and_its_options(path):
    parts = docs(path)
    documentation = yaml.safe_load(parts["DOCUMENTATION"])
    yaml.safe_load(parts["EXAMPLES"])
    yaml.safe_load(parts["RETURN"])
    assert documentation["module"] == path.stem
    for name in documentation.get("options") or {}:
        assert f'"{name}"' in path.read_text(), f"{path.stem}: documented option {name} is not in its argument_spec"
