"""Build step: copy the repository's data folders into the wheel as package data.

terraform/, templates/, ansible/ and examples/ stay at the repository root (the project's layout);
`build_py` copies them to `trainkit/_data/` inside the build, so an installed trainkit carries
them (trainkit/util/resources.py finds them there). Editable installs skip the copy and read the
source tree. Everything else is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA_FOLDERS = ("terraform", "templates", "ansible", "examples", "docs")  # = trainkit.util.resources.DATA_FOLDERS
SKIP = shutil.ignore_patterns(".terraform", "*.tfstate*", ".terraform.lock.hcl", "__pycache__", "*.pyc")


class BuildPyWithData(build_py):
    """build_py, then the data folders into <build_lib>/trainkit/_data/ (absent folders skipped)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "trainkit" / "_data"
        for name in DATA_FOLDERS:
            if (ROOT / name).is_dir():
                shutil.rmtree(target / name, ignore_errors=True)
                shutil.copytree(ROOT / name, target / name, ignore=SKIP)


setup(cmdclass={"build_py": BuildPyWithData})
