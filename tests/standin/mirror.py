"""Where terraform finds the provider stand-ins, and a running one it can reattach to.

Runs in trainkit's own venv (no grpc here): it writes launchers and starts server.py under
.venv-standin.

- install(folder): a filesystem mirror (terraform docs, "CLI Configuration File", provider
  installation, unpacked layout `HOSTNAME/NAMESPACE/TYPE/VERSION/TARGET/terraform-provider-TYPE_vVERSION`)
  with one launcher per provider, under the real source addresses and pinned versions. `init` then
  records an h1: hash of the launcher in .terraform.lock.hcl: such a lock file belongs to the test
  and is never committed (.gitignore holds .terraform.lock.hcl).
- cli_config(...): the provider_installation block that uses it.
- Reattached: one server process for the three providers, started once; terraform connects to it
  through TF_REATTACH_PROVIDERS (go-plugin ReattachConfig) instead of starting the provider 2-5
  times per command.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

from .schema import PROVIDERS

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PYTHON = REPO / ".venv-standin" / "bin" / "python"
TARGET = "linux_amd64"


def python() -> Path:
    """The stand-in venv's python; AssertionError naming the make target when it is missing."""
    assert PYTHON.exists(), f"{PYTHON} is missing: run `make standin` (make test does)"
    return PYTHON


def _launcher(name: str) -> str:
    """The provider executable: a shell script that runs server.py under .venv-standin, or says
    which make target installs it (terraform shows a plugin's stderr when it fails to start)."""
    py = shlex.quote(str(PYTHON))
    return ("#!/bin/sh\n"
            f"[ -x {py} ] || {{ echo \"{PYTHON} is missing: run make standin\" >&2; exit 1; }}\n"
            f"PYTHONPATH={shlex.quote(str(HERE.parent))} exec {py} -m standin.server {name}\n")


def install(folder: Path) -> Path:
    """Launchers for the three providers under `folder` (a filesystem mirror root); returns it."""
    for name, (source, version) in PROVIDERS.items():
        target = folder / "registry.terraform.io" / source / version / TARGET
        target.mkdir(parents=True, exist_ok=True)
        launcher = target / f"terraform-provider-{name}_v{version}"
        launcher.write_text(_launcher(name))
        launcher.chmod(0o755)
    return folder


def mirror_block(folder: Path) -> str:
    """A provider_installation filesystem_mirror block for the stand-ins only."""
    include = ", ".join(f'"registry.terraform.io/{source}"' for source, _ in PROVIDERS.values())
    return f'  filesystem_mirror {{\n    path    = "{folder}"\n    include = [{include}]\n  }}\n'


def direct_excludes() -> list[str]:
    return [f"registry.terraform.io/{source}" for source, _ in PROVIDERS.values()]


class Reattached:
    """The three stand-ins in one process: `env` holds TF_REATTACH_PROVIDERS for terraform.

    `cloud` is the stand-in cloud's folder (cloud.Store reads it); `env` adds the credentials the
    provider checks. Use as a context manager; the process is ended by PID on exit.
    """

    def __init__(self, folder: Path, env: dict[str, str]):
        self.folder = folder
        self.cloud = folder / "cloud"
        self._env = env
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] = {}

    def __enter__(self) -> "Reattached":
        out = self.folder / "reattach.json"
        out.unlink(missing_ok=True)  # a file left by an earlier server would name its dead process
        env = {**os.environ, **self._env, "TRAINKIT_STANDIN_CLOUD": str(self.cloud),
               "PYTHONPATH": str(HERE.parent)}
        self.proc = subprocess.Popen([str(python()), "-m", "standin.server", "--reattach", str(out), *PROVIDERS],
                                     env=env, stdout=subprocess.DEVNULL, stderr=open(self.folder / "server.log", "w"))
        deadline = time.monotonic() + 60
        while not out.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the provider stand-in did not start: {(self.folder / 'server.log').read_text()}")
            time.sleep(0.05)
        self.env = {"TF_REATTACH_PROVIDERS": out.read_text()}
        json.loads(self.env["TF_REATTACH_PROVIDERS"])
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
