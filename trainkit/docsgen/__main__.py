"""`python -m trainkit.docsgen [--check] [DOCS_DIR]`: write the generated reference pages into
DOCS_DIR (default docs/ of this checkout), or with --check list the stale ones and exit 1."""

from __future__ import annotations

import sys
from pathlib import Path

from trainkit.docsgen import stale, write


def main(argv: list[str]) -> int:
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    folder = Path(rest[0]) if rest else Path(__file__).resolve().parents[2] / "docs"
    if check:
        names = stale(folder)
        for name in names:
            print(f"{folder / name}: differs from the code; run `python -m trainkit.docsgen` (make docs-pages)", file=sys.stderr)
        return 1 if names else 0
    for name in write(folder):
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
