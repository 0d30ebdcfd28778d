"""The recovery loop's decision after an attempt that did not complete (ending.give_up, pure): the
status and reason the run is closed with, or None to replace what was lost and relaunch."""

from __future__ import annotations

import pytest

from trainkit.runs.ending import Outcome, give_up

HUNG = "hung (no step for the watchdog's window)"


@pytest.mark.parametrize("status,reclaim,recover,recoveries,restarts,closed", [
    ("preempted", True, False, 1, 0, ("preempted", "")),           # without --recover: the attempt's own status
    ("failed", False, False, 0, 1, ("failed", "")),
    ("hung", False, False, 0, 1, ("failed", HUNG)),
    ("cancelled", False, True, 0, 1, ("cancelled", "")),             # cancelled ends it, --recover or not
    ("reclaimed", True, True, 3, 0, None),                           # within --max-recoveries 3: go on
    ("reclaimed", True, True, 4, 0, ("preempted", "gave up after 3 recoveries")),
    ("failed", False, True, 0, 1, ("failed", "")),                   # --max-restarts-on-errors 0
    ("hung", False, True, 0, 1, ("failed", "hung, and --max-restarts-on-errors is spent")),
])
def test_the_loop_closes_the_run_or_goes_on_as_the_counts_say(status, reclaim, recover, recoveries, restarts, closed):
    assert give_up(Outcome(status), reclaim, recover, 3, 0, recoveries, restarts) == closed


def test_restarts_on_errors_are_allowed_up_to_their_limit():
    assert give_up(Outcome("failed"), False, True, 3, 2, 0, 2) is None
    assert give_up(Outcome("failed"), False, True, 3, 2, 0, 3) == ("failed", "")
