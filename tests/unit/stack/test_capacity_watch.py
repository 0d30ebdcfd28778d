"""The capacity watch interrupts terraform only once nothing but instance creations is in flight.

A child process plays terraform: it writes "refused" lines to the watch's pipe (the provider's
debug log), prints its own operation lines, and records when SIGINT reaches it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainkit.clouds.base import CapacityProblem
from trainkit.stack.capacity_watch import CapacityWatch, InFlight

pytestmark = pytest.mark.unit

REFUSED = CapacityProblem(kind="capacity", code="InsufficientInstanceCapacity", zone="z-a", instance_type="t")


def _reader(line: str):
    return REFUSED if "InsufficientInstanceCapacity" in line else None


def test_in_flight_counts_started_operations_until_their_end_line_and_ignores_instances():
    f = InFlight(still_s=1e9)
    for line in ["module.cluster.aws_instance.node[0]: Creating...",
                 "module.cluster.aws_security_group_rule.egress: Creating...",
                 "module.cluster.aws_efs_mount_target.this[0]: Creating...",
                 "module.cluster.aws_efs_mount_target.this[0]: Still creating... [10s elapsed]",
                 "module.cluster.huaweicloud_compute_instance.node[1]: Creating...",
                 "module.cluster.aws_subnet.this: Destroying... [id=subnet-1]"]:
        f.feed(line + "\n")
    assert f.others() == ["module.cluster.aws_efs_mount_target.this[0]",
                          "module.cluster.aws_security_group_rule.egress", "module.cluster.aws_subnet.this"]
    f.feed("module.cluster.aws_security_group_rule.egress: Creation complete after 1s [id=sgrule-1]")
    f.feed("module.cluster.aws_efs_mount_target.this[0]: Creation complete after 61s [id=fsmt-1]")
    f.feed("module.cluster.aws_subnet.this: Destruction complete after 0s")
    assert f.others() == []
    f.feed("module.cluster.aws_eip.node[0]: Creating...")     # an address named node, not an instance
    assert f.others() == ["module.cluster.aws_eip.node[0]"]


def test_an_operation_that_stopped_printing_has_failed_and_is_not_waited_for():
    # A security group rule whose create failed (InvalidPermission.Duplicate): terraform prints no
    # end line, only the error when the whole apply ends, and no more "Still creating..." lines.
    f = InFlight(still_s=30)
    f.feed("module.cluster.aws_security_group_rule.ssh: Creating...", now=0)
    f.feed("module.cluster.aws_efs_mount_target.this[0]: Creating...", now=0)
    f.feed("module.cluster.aws_instance.node[0]: Creating...", now=0)
    for t in (10, 20, 30, 40):   # the mount target is still being waited for; the rule went quiet
        f.feed("module.cluster.aws_efs_mount_target.this[0]: Still creating... [%ds elapsed]" % t, now=t)
    assert f.others(now=25) == ["module.cluster.aws_efs_mount_target.this[0]",
                                "module.cluster.aws_security_group_rule.ssh"]
    assert f.others(now=45) == ["module.cluster.aws_efs_mount_target.this[0]"]
    assert f.others(now=75) == []


def test_an_operation_that_just_ended_may_start_another_so_the_watch_waits_a_moment():
    # the route table's create ends; terraform starts the association that waited on it at once,
    # and its line arrives a moment later: a SIGINT in that gap would cut off a create
    f = InFlight(still_s=30, settle_s=3)
    f.feed("module.cluster.aws_instance.node[0]: Creating...", now=0)
    assert f.settled(now=0.5)                       # only the refused instance: interrupt now
    f.feed("module.cluster.aws_route_table.this: Creating...", now=1)
    f.feed("module.cluster.aws_route_table.this: Creation complete after 1s [id=rtb-1]", now=10)
    assert f.others(now=10.2) == [] and not f.settled(now=10.2)
    f.feed("module.cluster.aws_route_table_association.this: Creating...", now=10.4)
    assert not f.settled(now=13.5)
    f.feed("module.cluster.aws_route_table_association.this: Creation complete after 0s [id=rtbassoc-1]", now=14)
    assert not f.settled(now=16.9) and f.settled(now=17.0)


# The stand-in terraform: refuses three times on the pipe, then waits for SIGINT and prints when
# it arrived relative to its own start (the parent compares with when the rule create ended).
CHILD = r"""
import os, signal, sys, time
t0 = time.monotonic()
signal.signal(signal.SIGINT, lambda *a: (print(f"SIGINT {time.monotonic() - t0:.2f}", flush=True), sys.exit(1)))
print("module.cluster.aws_instance.node[0]: Creating...", flush=True)
print("module.cluster.aws_security_group_rule.egress: Creating...", flush=True)
# the refusals come an API round trip later; wait until the parent has read the lines above, so
# a busy machine cannot deliver the refusals to the watch before it knows the rule is in flight
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
with open(os.environ["TF_LOG_PATH"], "w") as log:
    for _ in range(3):
        log.write("api error InsufficientInstanceCapacity: We currently do not have sufficient t\n")
        log.flush()
    time.sleep(float(sys.argv[1]))
    print(f"module.cluster.aws_security_group_rule.egress: Creation complete after 1s [id=r] "
          f"{time.monotonic() - t0:.2f}", flush=True)
    time.sleep(0.3)   # a dependent of the rule starts once it is saved, and takes a second
    print("module.cluster.aws_security_group_rule.intra: Creating...", flush=True)
    time.sleep(1.0)
    print(f"module.cluster.aws_security_group_rule.intra: Creation complete after 1s [id=r2] "
          f"{time.monotonic() - t0:.2f}", flush=True)
    time.sleep(30)
print("never interrupted", flush=True)
"""


def _run_child(tmp_path, rule_takes_s: float, quiet_wait_s: float) -> tuple[CapacityWatch, list[str]]:
    watch = CapacityWatch(tmp_path / "pipe", _reader, tmp_path / "terraform.log", quiet_wait_s=quiet_wait_s)
    lines = []
    with watch:
        fed = tmp_path / "fed"
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(rule_takes_s), str(fed)], env=watch.env({}),
                                stdout=subprocess.PIPE, text=True)
        watch.attach(proc)
        for line in proc.stdout:
            lines.append(line.strip())
            watch.inflight.feed(line)
            if "egress: Creating" in line:
                fed.touch()
        proc.wait(timeout=60)
    return watch, lines


def test_the_interrupt_waits_for_the_rule_create_to_end_then_comes_at_once(tmp_path):
    watch, lines = _run_child(tmp_path, rule_takes_s=1.5, quiet_wait_s=60)
    assert watch.problem == REFUSED
    done = [float(x.rsplit(" ", 1)[1]) for x in lines if "Creation complete" in x]
    sigint = next(float(x.split()[1]) for x in lines if x.startswith("SIGINT"))
    assert len(done) == 2 and done[1] <= sigint, lines  # not before the rule and its dependent were saved
    assert "never interrupted" not in lines         # and not left to the provider's retries
    assert "InsufficientInstanceCapacity" in (tmp_path / "terraform.log").read_text()


def test_an_operation_that_never_ends_is_waited_for_at_most_quiet_wait_s(tmp_path):
    watch, lines = _run_child(tmp_path, rule_takes_s=25, quiet_wait_s=1)
    sigint = next(float(x.split()[1]) for x in lines if x.startswith("SIGINT"))
    assert not any("Creation complete" in x for x in lines) and sigint < 20, lines
