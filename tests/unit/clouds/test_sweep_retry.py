"""sweep_common.retry_throttled: the sweepers' answer to a cloud's throttling (the SDKs retry none)."""

from __future__ import annotations

import pytest

from trainkit.clouds import sweep_common


class Throttled(Exception):
    code = "Throttling.User"


def _calls(outcomes: list):
    """A call that raises or returns each of `outcomes` in turn, and the list of its calls."""
    made = []

    def call():
        made.append(1)
        out = outcomes[len(made) - 1]
        if isinstance(out, Exception):
            raise out
        return out

    return call, made


def test_a_throttled_call_is_retried_with_backoff_until_it_succeeds(monkeypatch):
    slept = []
    monkeypatch.setattr(sweep_common.time, "sleep", slept.append)
    call, made = _calls([Throttled(), Throttled(), "ok"])
    assert sweep_common.retry_throttled(call, lambda e: isinstance(e, Throttled)) == "ok"
    assert len(made) == 3 and slept == [1.0, 2.0]


def test_the_last_throttling_error_and_any_other_error_propagate(monkeypatch):
    monkeypatch.setattr(sweep_common.time, "sleep", lambda s: None)
    call, made = _calls([Throttled()] * sweep_common.THROTTLE_ATTEMPTS)
    with pytest.raises(Throttled):
        sweep_common.retry_throttled(call, lambda e: isinstance(e, Throttled))
    assert len(made) == sweep_common.THROTTLE_ATTEMPTS
    call, made = _calls([KeyError("x"), "never"])
    with pytest.raises(KeyError):
        sweep_common.retry_throttled(call, lambda e: isinstance(e, Throttled))
    assert len(made) == 1
