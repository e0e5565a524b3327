#!/usr/bin/env python3
"""Write each role's README.md from its meta/argument_specs.yml: what the role does, the playbooks
that run it, and every option of every entry point with its type, default and constraint (`check:`,
enforced before any change). The specs are the one home of the options; the READMEs follow them.

    scripts/role-readmes.py           write roles/*/README.md
    scripts/role-readmes.py --check   fail, naming the roles, where a README is not what the specs give
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
MARKUP = re.compile(r"\b([OVCI])\(([^()]*)\)")  # ansible-doc's O(option), V(value), C(code), I(italic)


def text(value: str) -> str:
    plain = MARKUP.sub(lambda m: f"*{m[2]}*" if m[1] == "I" else f"`{m[2]}`", value)
    return " ".join(plain.split())


def cell(value: str) -> str:
    return text(value).replace("|", "\\|")


def described(spec: dict[str, Any]) -> str:
    description = spec.get("description", "")
    return " ".join(description) if isinstance(description, list) else str(description)


def default(spec: dict[str, Any]) -> str:
    if spec.get("required"):
        return "required"
    if "default" not in spec:
        return ""
    return "`" + json.dumps(spec["default"], ensure_ascii=False).replace("|", "\\|") + "`"


def option_rows(options: dict[str, Any], prefix: str = "") -> list[str]:
    rows = []
    for name, spec in options.items():
        kind = spec.get("type", "str") + (f" of {spec['elements']}" if spec.get("elements") else "")
        choices = f" One of {', '.join(f'`{c}`' for c in spec['choices'])}." if spec.get("choices") else ""
        check = f"`{spec['check']}`" if spec.get("check") else ""
        rows.append(f"| `{prefix}{name}` | {kind} | {default(spec)} | {check} | {cell(described(spec))}{choices} |")
        rows += option_rows(spec.get("options") or {}, f"{prefix}{name}.")
    return rows


def playbooks_running(role: str) -> list[str]:
    pattern = re.compile(rf"\bgpufleet\.platform\.{role}\b")
    found = [
        p for p in [REPO / "site.yml", *sorted((REPO / "playbooks").glob("*.yml"))] if pattern.search(p.read_text())
    ]
    return [str(p.relative_to(REPO)) for p in found]


def readme(role: Path) -> str:
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    name = role.name
    # A role without a main entry point only lends task files to other roles (tasks_from).
    main = specs.get("main")
    galaxy = yaml.safe_load((role / "meta" / "main.yml").read_text())["galaxy_info"]
    out = [
        f"# gpufleet.platform.{name}",
        "",
        "<!-- Generated from meta/argument_specs.yml by scripts/role-readmes.py: edit the specs, then run it. -->",
        "",
        text(main["short_description"] if main else galaxy["description"]) + ("" if main else "."),
        "",
    ]
    description = (main or {}).get("description") or []
    for paragraph in description if isinstance(description, list) else [description]:
        out += [text(paragraph), ""]
    runs = playbooks_running(name)
    out += ["## Use", ""]
    if runs:
        out += ["Run by " + ", ".join(f"`{p}`" for p in runs) + "; on its own:", ""]
    if main:
        out += ["```yaml", "- ansible.builtin.include_role:", f"    name: gpufleet.platform.{name}", "```", ""]
    else:
        first = next(iter(specs))
        out += ["```yaml", "- ansible.builtin.import_role:", f"    name: gpufleet.platform.{name}",
                f"    tasks_from: {first}", "```", ""]  # fmt: skip
    out += [
        "Every option is checked before the role changes anything; `check` names the constraint",
        "(`plugins/module_utils/validate.py`), and a failure names the variable to fix.",
        "",
    ]
    for entry, spec in specs.items():
        title = "## Options" if len(specs) == 1 else f"## Entry point `{entry}`"
        out += [title, ""]
        if len(specs) > 1:
            how = "" if entry == "main" else f" (`tasks_from: {entry}`)"
            out += [text(spec["short_description"]) + how, ""]
        options = spec.get("options") or {}
        if options:
            out += ["| option | type | default | check | description |", "| --- | --- | --- | --- | --- |"]
            out += option_rows(options)
        else:
            out.append("No options.")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; fail where a README is stale")
    args = parser.parse_args()
    stale = []
    for role in sorted((REPO / "roles").iterdir()):
        if not (role / "meta" / "argument_specs.yml").is_file():
            continue
        wanted, path = readme(role), role / "README.md"
        if path.exists() and path.read_text() == wanted:
            continue
        stale.append(role.name)
        if not args.check:
            path.write_text(wanted)
    if args.check and stale:
        print(f"stale role READMEs (run scripts/role-readmes.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    if not args.check:
        print(f"wrote {len(stale)} role README(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
