"""The seed clouds' provider stand-ins (tests/standin): the CPU terraform and the stand-in spend on one
`terraform validate` and one `terraform plan` of each example stack, with the provider started by
terraform from the filesystem mirror (2-5 starts per command) vs one process reattached
(TF_REATTACH_PROVIDERS, what the infra tests use), measured alternately (not a test; `make bench`).

CPU is the one figure that matters on the 2-core test machines (CI prints CPU per test module):
wall time there depends on the other workers. Each row: median CPU seconds (the command and its
children, from os.times; the reattached server's own CPU counted too) of validate and of plan,
mirror vs reattached, and their ratio.

Needs terraform, .venv-standin (make standin) and trainkit's venv.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROUNDS = 5
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "infra"))


def _server_cpu(pid: int | None) -> float:
    """CPU seconds the reattached server has used (proc(5): utime and stime, fields 14-15)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(argv: list[str], cwd: Path, env: dict, server: int | None = None) -> float:
    """CPU seconds (user + system) of `argv`, every process it waited for, and the reattached
    server's share (pid `server`) while it ran."""
    before, served = os.times(), _server_cpu(server)
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = os.times()
    return ((after.children_user - before.children_user) + (after.children_system - before.children_system)
            + _server_cpu(server) - served)


def _stack(folder: Path, cloud: str, env: dict) -> Path:
    from seed_clouds import write_spec

    spec = write_spec(REPO, folder, cloud)
    ws = folder / f"ws-{cloud}"
    subprocess.run([sys.executable, "-m", "trainkit", "render", str(spec), "--workdir", str(ws)], env=env,
                   check=True, capture_output=True)
    subprocess.run(["terraform", "init", "-input=false", "-no-color"], cwd=ws / "terraform", env=env, check=True,
                   capture_output=True)
    return ws / "terraform"


def main() -> None:
    from seed_clouds import CLOUDS, SEED_ENV
    from standin import mirror

    with tempfile.TemporaryDirectory(prefix="bench-standin-") as tmp:
        root = Path(tmp)
        rc = root / "terraformrc"
        rc.write_text("provider_installation {\n" + mirror.mirror_block(mirror.install(root / "mirror"))
                      + "}\n")
        (root / "standin").mkdir()
        base = {**os.environ, **SEED_ENV, "TF_CLI_CONFIG_FILE": str(rc), "CHECKPOINT_DISABLE": "1",
                "TRAINKIT_STANDIN_CLOUD": str(root / "cloud")}
        base.pop("TF_REATTACH_PROVIDERS", None)
        stacks = {cloud: _stack(root, cloud, base) for cloud in CLOUDS}
        with mirror.Reattached(root / "standin", SEED_ENV) as served:
            attached = {**base, **served.env}
            print(f"provider stand-ins: CPU s per command, median of {ROUNDS} (mirror = terraform starts the "
                  "provider; reattached = one process)")
            print(f"{'stack':<14}{'command':<10}{'mirror':>8}{'reattached':>12}{'ratio':>8}")
            for cloud, stack in stacks.items():
                for command in (["validate", "-no-color"], ["plan", "-input=false", "-no-color", "-lock=false"]):
                    started, joined = [], []
                    for _ in range(ROUNDS):
                        started.append(_cpu(["terraform", *command], stack, base))
                        joined.append(_cpu(["terraform", *command], stack, attached, served.proc.pid))
                    a, b = statistics.median(started), statistics.median(joined)
                    print(f"{cloud:<14}{command[0]:<10}{a:>8.2f}{b:>12.2f}{b / a:>8.2f}")


if __name__ == "__main__":
    main()
