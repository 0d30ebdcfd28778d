"""trainkit as users install it: a wheel built from a copy of the repository, installed (not
editable) into a fresh venv, the source copy deleted, and every command run from a folder outside
the repository with no PYTHONPATH.

The fresh venv gets ONLY the wheel from pip (`--no-deps --no-index`); its dependencies (click,
jinja2, torch, ansible, ...) come from this test run's own site-packages through a .pth line added
after the install (a path line: the editable finder there is not loaded, so `import trainkit`
can only find the wheel's copy). Real ansible-runner on localhost and torchrun; nothing is stubbed.
(terraform plan/apply from the same packaged modules runs in tests/infra against moto.)
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

_SKIP_ANYWHERE = shutil.ignore_patterns(".git", ".venv*", ".trainkit", "*.egg-info", "__pycache__",
                                       ".pytest_cache", ".terraform")
# Only at the top (what .gitignore's /build/, /dist/, /runs/ mean): trainkit/runs/ is a package.
_SKIP_AT_TOP = {"build", "dist", "tests", "benchmarks", "runs"}


def skip(repo: Path):
    def ignore(folder: str, names: list[str]) -> set[str]:
        top = _SKIP_AT_TOP & set(names) if Path(folder) == repo else set()
        return set(_SKIP_ANYWHERE(folder, names)) | top
    return ignore


def build_wheel(repo: Path, tmp: Path) -> Path:
    src = tmp / "src"
    shutil.copytree(repo, src, ignore=skip(repo), symlinks=False)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(tmp / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shutil.rmtree(src)  # the installed trainkit must not need it
    (wheel,) = (tmp / "dist").glob("trainkit_clusters-*.whl")  # the distribution's name (trainkit/util/dist.py)
    return wheel


def fresh_venv(wheel: Path, tmp: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    proc = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = subprocess.run([str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "zz-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def test_wheel_installed_in_a_fresh_venv_works_without_the_source_tree(repo, tmp_path):
    wheel = build_wheel(repo, tmp_path)
    venv = fresh_venv(wheel, tmp_path)
    here = tmp_path / "elsewhere"
    here.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", NO_PROXY="127.0.0.1,localhost",
               PATH=f"{venv}/bin{os.pathsep}{env['PATH']}{os.pathsep}{Path(sys.executable).parent}")
    # examples/clusters/hosts.yaml logs in with ~/.ssh/lab_ed25519; key files must exist.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "lab_ed25519").write_text("not read by validate\n")
    env["HOME"] = str(home)

    def tk(*args: str) -> str:
        proc = subprocess.run([str(venv / "bin/trainkit"), *args], cwd=here, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, f"trainkit {' '.join(args)}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        return proc.stdout  # stderr holds progress and warnings

    where = subprocess.run([str(venv / "bin/python"), "-c", "import trainkit.util.resources as r; "
                            "print(r.data_root()); print(r.source_tree())"],
                           cwd=here, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert where[0].startswith(str(venv)) and where[0].endswith("_data") and where[1] == "None"

    tk("examples", "--copy", "ex")
    assert (here / "ex/custom/train.py").is_file() and (here / "ex/ci/gitlab-ci.yml").is_file()
    assert tk("docs", "training").startswith("# Training with trainkit")  # docs/ ships in the wheel
    specs = sorted((here / "ex/clusters").glob("*.yaml"))
    assert {p.stem for p in specs} >= {"local", "hosts", "aws", "aws-moto", "alicloud", "tencentcloud",
                                      "huaweicloud"}
    for spec in specs:
        tk("validate", str(spec))
    for cloud in ("alicloud", "tencentcloud", "huaweicloud", "aws"):
        out = tk("render", f"ex/clusters/{cloud}.yaml", "--workdir", f"ws-{cloud}")
        assert (here / f"ws-{cloud}/terraform/modules/{cloud}/main.tf").is_file(), out
    for name in ("local", "hosts"):
        assert json.loads(tk("plan", f"ex/clusters/{name}.yaml", "--format", "json"))["cloud"] == name

    tk("apply", "ex/clusters/local.yaml", "--workdir", "ws-local", "--yes")
    out = tk("train", "ex/clusters/local.yaml", "--workdir", "ws-local", "epochs=1", "export.onnx=false")
    (run,) = (here / "ws-local/runs").iterdir()
    assert json.loads((run / "summary.json").read_text())["status"] == "completed", out
    tk("destroy", "ex/clusters/local.yaml", "--workdir", "ws-local", "--yes")
    assert sorted(p.name for p in (here / "ws-local").iterdir() if p.name not in ("lock", ".trainkit-workspace")) == ["runs"]


def _pipeline_packages(text: str) -> list[str]:
    """What a CI pipeline pip-installs: its TRAINKIT_PACKAGE value, and any literal `pip install X`."""
    found = re.findall(r'TRAINKIT_PACKAGE:\s*"([^"]+)"', text)
    found += [p for p in re.findall(r"pip install (?:-q )?[\"']?([A-Za-z][\w.\-]*(?:\[[\w,]+\])?)", text)
              if not p.startswith("$")]
    return found


def test_the_wheel_is_the_distribution_the_ci_pipelines_install(repo, tmp_path):
    from trainkit.util.dist import DISTRIBUTION

    wheel = build_wheel(repo, tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        meta = email.parser.Parser().parsestr(
            zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode())
        entry_points = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert meta["Name"] == DISTRIBUTION and wheel.name.startswith("trainkit_clusters-")
    assert "trainkit = trainkit.cli:main" in entry_points  # the command keeps its name
    extras = set(meta.get_all("Provides-Extra"))
    pipelines = sorted(p for p in (repo / "examples/ci").rglob("*.yml"))
    assert len(pipelines) == 3
    for pipeline in pipelines:
        text = pipeline.read_text()
        packages = _pipeline_packages(text)
        assert packages, f"{pipeline.name} installs nothing"
        cloud = Path(re.search(r"TRAINKIT_SPEC:\s*(\S+)", text).group(1)).stem
        for package in packages:
            name, _, wanted = package.partition("[")
            wanted = set(wanted.rstrip("]").split(",")) - {""}
            assert name == meta["Name"], f"{pipeline.name} installs {name}, not {meta['Name']}"
            assert wanted <= extras, f"{pipeline.name}: extras {wanted - extras} are not in the wheel"
            assert cloud in wanted, f"{pipeline.name} runs on {cloud} without the {cloud!r} extra"
            if re.search(r"trainkit (apply|train)\b", text):
                assert "control" in wanted, f"{pipeline.name} applies or trains without the 'control' extra"
