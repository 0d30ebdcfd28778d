"""Control-side overhead, measured side by side in one run (not a test; `make bench`).

1. `trainkit --help` vs `python -c "import click"`: the CLI's start-up cost over its floor.
2. On a moto server (the AWS API emulator) on 127.0.0.1: `trainkit plan` vs the raw terraform
   commands it wraps (init + plan -out + show -json) on the same rendered stack, and
   `trainkit apply` + `destroy` vs raw `terraform apply` + `destroy`. Target overhead <= 5%.
3. The CPU time and peak memory of one `terraform plan` of that stack with the GOGC trainkit sets
   (trainkit/stack/terraform.py) vs Go's default (100), alternating.

Prints medians and ratios. Needs terraform and the offline provider mirror (see tests/conftest.py).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable


def timed(argv: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def side_by_side(a: list[str], b: list[str], rounds: int, cwd_a=None, cwd_b=None) -> tuple[float, float]:
    """Median wall time of `a` and `b`, run alternately so both see the same machine load."""
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(timed(a, cwd_a))
        tb.append(timed(b, cwd_b))
    return statistics.median(ta), statistics.median(tb)


def cpu_and_rss(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(user+system CPU seconds, peak RSS in MB) of `argv` and the children it waited for (the
    provider plugins terraform starts), from wait4's rusage."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}"
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def bench_gogc(raw: Path, rounds: int = 4) -> None:
    """`terraform plan` with trainkit's GOGC vs Go's default, ABBA: medians of CPU and peak RSS."""
    from trainkit.stack.terraform import GOGC, command_env

    plan = ["terraform", "plan", "-input=false", "-no-color", "-out=gogc.bin"]
    runs: dict[str, list[tuple[float, float]]] = {GOGC: [], "100": []}
    for i in range(rounds):
        for value in ((GOGC, "100") if i % 2 == 0 else ("100", GOGC)):
            runs[value].append(cpu_and_rss(plan, raw, command_env({"GOGC": value})))
    (ours_cpu, ours_rss), (base_cpu, base_rss) = (
        tuple(statistics.median(x) for x in zip(*runs[v])) for v in (GOGC, "100"))
    report(f"terraform plan CPU s, GOGC={GOGC} vs 100", ours_cpu, base_cpu, "lower is better")
    print(f"{'  peak memory of that plan':<44} {ours_rss:7.0f} MB vs {base_rss:7.0f} MB  ratio "
          f"{ours_rss / base_rss:5.2f}")


def report(name: str, ours: float, base: float, target: str) -> None:
    print(f"{name:<44} trainkit {ours:7.2f} s  baseline {base:7.2f} s  ratio {ours / base:5.2f}  ({target})")


def bench_help() -> None:
    ours, base = side_by_side([PY, "-m", "trainkit", "--help"], [PY, "-c", "import click"], rounds=10)
    report("`trainkit --help` vs `import click`", ours, base, "start-up over click alone")


def tests_importable() -> None:
    """tests/conftest.py and its helpers (ports.py, infra/fault_proxy.py) import as pytest has them."""
    for folder in (REPO / "tests", REPO / "tests" / "infra"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


def _tf_config(tmp: Path) -> None:
    tests_importable()
    from moto_aws import AWS_ENV  # the emulator's fake keys, in the environment like real ones

    from tests.conftest import _find_mirror  # the same discovery the tests use

    mirror = os.environ.get("TRAINKIT_TF_MIRROR") or _find_mirror()
    rc = tmp / "terraformrc"
    rc.write_text(f'provider_installation {{\n  filesystem_mirror {{\n    path = "{mirror}"\n'
                  '    include = ["registry.terraform.io/hashicorp/*"]\n  }\n'
                  '  direct {\n    exclude = ["registry.terraform.io/hashicorp/*"]\n  }\n}\n')
    os.environ.update(AWS_ENV, TF_CLI_CONFIG_FILE=str(rc), CHECKPOINT_DISABLE="1")


def bench_terraform() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="trainkit-bench-"))
    _tf_config(tmp)
    from tests.conftest import running_moto

    with running_moto() as url:
        spec = yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())
        spec["endpoints"] = {k: url for k in spec["endpoints"]}
        spec_path = tmp / "cluster.yaml"
        spec_path.write_text(yaml.safe_dump(spec))
        ws, raw = tmp / "ws", tmp / "raw"
        tk = [PY, "-m", "trainkit"]
        subprocess.run(tk + ["render", str(spec_path), "--workdir", str(ws)], check=True,
                       stdout=subprocess.DEVNULL)
        shutil.copytree(ws / "terraform", raw)
        shutil.copytree(ws / "ssh", tmp / "ssh", dirs_exist_ok=True)
        raw_plan = ["sh", "-c", "terraform init -input=false >/dev/null && terraform plan -input=false "
                                "-out=p.bin >/dev/null && terraform show -json p.bin >/dev/null"]
        ours, base = side_by_side(tk + ["plan", str(spec_path), "--workdir", str(ws), "--format", "json"],
                                  raw_plan, rounds=3, cwd_b=raw)
        report("`trainkit plan` vs init+plan+show -json", ours, base, "target overhead <= 5%")
        bench_gogc(raw)
        reset = urllib.request.Request(url + "/moto-api/reset", method="POST")
        t_raw = timed(["terraform", "apply", "-input=false", "-auto-approve"], raw)
        t_raw += timed(["terraform", "destroy", "-input=false", "-auto-approve"], raw)
        urllib.request.urlopen(reset, timeout=5)
        t_ours = timed(tk + ["apply", str(spec_path), "--workdir", str(ws), "--no-provision", "--yes"])
        t_ours += timed(tk + ["destroy", str(spec_path), "--workdir", str(ws), "--yes"])
        report("`trainkit apply+destroy` vs terraform apply+destroy", t_ours, t_raw,
               "target overhead <= 5%; ours also re-plans and checks the state is empty")
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    print("== control side (benchmarks/bench_cli.py) ==")
    bench_help()
    if shutil.which("terraform"):
        bench_terraform()
    else:
        print("terraform not on PATH: plan/apply benchmark not run")


if __name__ == "__main__":
    main()
