"""`python -m benchmarks [NAME ...]`: run benchmarks/bench_NAME.py modules' main(), print ratios.

With no NAME every module runs; `--list` names them. A failing module is reported and the others
still run; the exit status is 1 if any failed, 2 for an unknown name.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path


def available() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in Path(__file__).parent.glob("bench_*.py"))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks", description="Side-by-side benchmarks; each prints ratios "
        "measured in one run (not tests: no pass/fail on speed).",
        epilog=f"benchmarks: {', '.join(available())}\nexample: python -m benchmarks checkpoint",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    names = available()
    if args.list:
        print("\n".join(names))
        return 0
    unknown = [n for n in args.names if n.removeprefix("bench_") not in names]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(names)}",
              file=sys.stderr)
        return 2
    chosen = [n.removeprefix("bench_") for n in args.names] or names
    failed = []
    for name in chosen:
        try:
            importlib.import_module(f"benchmarks.bench_{name}").main()
        except Exception:
            traceback.print_exc()
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
