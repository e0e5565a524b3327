"""Every module's DOCUMENTATION, EXAMPLES and RETURN are YAML that ansible-doc can read, and the
documented options are the ones the module takes (caught here, not at the collection build)."""

import ast
from pathlib import Path

import pytest
import yaml

PLUGINS = Path(__file__).resolve().parents[4] / "plugins"
MODULES = sorted((PLUGINS / "modules").glob("*.py"))


def docs(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {
        node.targets[0].id: node.value.value
        for node in ast.walk(tree)  # a doc fragment's DOCUMENTATION is a class attribute
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }


def options(documentation: dict) -> dict:
    """The module's own options and those of the collection's doc fragments it extends."""
    found = dict(documentation.get("options") or {})
    for fragment in documentation.get("extends_documentation_fragment") or []:
        if fragment.startswith("gpufleet.platform."):  # ansible.builtin's describe attributes only
            name = fragment.removeprefix("gpufleet.platform.")
            found |= yaml.safe_load(docs(PLUGINS / "doc_fragments" / f"{name}.py")["DOCUMENTATION"])["options"]
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_docs_parse_and_name_the_module_and_its_options(path):
    parts = docs(path)
    documentation = yaml.safe_load(parts["DOCUMENTATION"])
    yaml.safe_load(parts["EXAMPLES"])
    yaml.safe_load(parts["RETURN"])
    assert documentation["module"] == path.stem
    for name in options(documentation):
        assert f'"{name}"' in path.read_text(), f"{path.stem}: documented option {name} is not in its argument_spec"
