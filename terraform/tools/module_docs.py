"""Write the Inputs and Outputs tables of each module README from its variables.tf and outputs.tf.

    python terraform/tools/module_docs.py          # rewrite every terraform/modules/*/README.md
    python terraform/tools/module_docs.py --check  # exit 1 when a README is out of date

The tables sit between `<!-- BEGIN_TF_DOCS -->` and `<!-- END_TF_DOCS -->` (terraform-docs'
markers); everything else in the README is hand-written and left alone. Needs python-hcl2 (dev
extra). tests/unit/stack/test_module_docs.py fails when a README and its .tf files disagree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hcl2

MODULES = Path(__file__).resolve().parent.parent / "modules"
BEGIN, END = "<!-- BEGIN_TF_DOCS -->", "<!-- END_TF_DOCS -->"


def _unwrap(text: str) -> str:
    """hcl2 gives strings quoted and expressions as ${...}; return the source text."""
    text = str(text)
    if text.startswith("${") and text.endswith("}"):
        return text[2:-1]
    if text.startswith('"') and text.endswith('"'):
        return json.loads(text)
    return text


def _hcl_value(value: Any) -> str:
    """A default value as HCL source, the way `terraform fmt` users write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k} = {_hcl_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_hcl_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(_unwrap(value)) if value.startswith('"') else value
    return json.dumps(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _blocks(path: Path, kind: str) -> list[tuple[str, dict]]:
    if not path.is_file():
        return []
    with path.open() as fh:
        parsed = hcl2.load(fh)
    return [(_unwrap(name), body) for block in parsed.get(kind, []) for name, body in block.items()]


def tables(module: Path) -> str:
    """The generated block (markers included) for one module folder."""
    lines = [BEGIN, "## Inputs", "", "| Name | Description | Type | Default |",
             "|------|-------------|------|---------|"]
    for name, body in _blocks(module / "variables.tf", "variable"):
        default = f"`{_hcl_value(body['default'])}`" if "default" in body else "n/a (required)"
        lines.append(f"| `{name}` | {_cell(_unwrap(body.get('description', '')))} | "
                     f"`{_cell(_unwrap(body.get('type', 'any')))}` | {_cell(default)} |")
    lines += ["", "## Outputs", "", "| Name | Description |", "|------|-------------|"]
    for name, body in _blocks(module / "outputs.tf", "output"):
        lines.append(f"| `{name}` | {_cell(_unwrap(body.get('description', '')))} |")
    return "\n".join(lines + [END])


def updated(readme: str, block: str) -> str:
    """`readme` with its generated block replaced (appended when the markers are missing)."""
    if BEGIN in readme and END in readme:
        head, _, rest = readme.partition(BEGIN)
        _, _, tail = rest.partition(END)
        return head + block + tail
    return readme.rstrip("\n") + "\n\n" + block + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for module in sorted(p for p in MODULES.iterdir() if (p / "variables.tf").is_file()):
        readme_path = module / "README.md"
        current = readme_path.read_text() if readme_path.exists() else f"# {module.name}\n"
        new = updated(current, tables(module))
        if new != current:
            stale.append(readme_path)
            if not check:
                readme_path.write_text(new)
    for path in stale:
        print(f"{'out of date' if check else 'rewrote'}: {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
