"""`trainkit ARGS` run in the test's own process, as a user's shell would run it."""

from __future__ import annotations

import pytest

from trainkit.cli import main


def run_cli(capsys, *args: str) -> tuple[int, str]:
    """(exit code, stderr) of `trainkit ARGS`; fails on a traceback or an internal error."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return exc.value.code, err
