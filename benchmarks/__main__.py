"""`python -m benchmarks [name ...]`: import every benchmarks/bench_*.py and run its main().

With names (e.g. `train`), only bench_<name>.py modules run. A failing module is reported and the
others still run; the exit status is 1 if any failed.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    names = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    if argv:
        names = [n for n in names if n.removeprefix("bench_") in argv or n in argv]
    failed = []
    for name in names:
        try:
            importlib.import_module(f"benchmarks.{name}").main()
        except Exception:
            traceback.print_exc()
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
