"""The distribution trainkit installs as, and the pip command line for an extra.

The import package and the command are `trainkit`; the distribution is `trainkit-clusters`
(the name `trainkit` on the public index is an unrelated project, so `pip install trainkit`
installs something else). pyproject.toml's `[project] name` and its extras are the source of
this; tests/unit/test_distribution.py keeps them equal.
"""

from __future__ import annotations

DISTRIBUTION = "trainkit-clusters"
# Extras (pyproject.toml [project.optional-dependencies]): `control` (Ansible), `train` (the
# nodes), one per cloud target named as the target (its SDK), and `prices` (every cloud's).


def pip_install(*extras: str) -> str:
    """`pip install 'trainkit-clusters[a,b]'` for error messages' fixes."""
    return f"pip install '{DISTRIBUTION}[{','.join(extras)}]'" if extras else f"pip install {DISTRIBUTION}"
