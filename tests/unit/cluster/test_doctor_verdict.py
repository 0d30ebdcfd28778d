"""doctor's arithmetic against nccl-tests' formulas (NVIDIA/nccl-tests doc/PERFORMANCE.md:
algbw = S / t; all-reduce busbw = algbw * 2(n-1)/n), and the verdicts from probe and bench data."""

from __future__ import annotations

import pytest

from trainkit.cluster import doctor_verdict as v

pytestmark = pytest.mark.unit

TH = v.Thresholds()


# ------------------------------------------------------------------ arithmetic

def test_algbw_is_bytes_over_seconds():
    assert v.algbw(1e9, 0.5) == 2e9
    with pytest.raises(ValueError):
        v.algbw(1e9, 0.0)


@pytest.mark.parametrize("n, factor", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (16, 1.875)])
def test_allreduce_busbw_is_algbw_times_2_n_minus_1_over_n(n, factor):
    assert v.allreduce_busbw(10.0, n) == pytest.approx(10.0 * factor)


def test_figures_match_an_nccl_tests_row():
    # a worked example in all_reduce_perf's units: 16 ranks, 8 GiB in 47,437 us:
    # algbw = 8589934592 / 0.047437 s = 181.08 GB/s; busbw = 181.08 * 30/16 = 339.53 GB/s
    f = v.figures(8589934592, 0.047437, 16)
    assert f["algbw_gbs"] == pytest.approx(181.08, abs=0.01)
    assert f["busbw_gbs"] == pytest.approx(339.53, abs=0.01)


def test_pairs_every_pair_up_to_8_then_ring_and_opposite():
    assert v.pairs_for(3) == [(0, 1), (0, 2), (1, 2)]
    assert len(v.pairs_for(8)) == 28
    big = v.pairs_for(16)
    assert len(big) == 24 and all(sum(n in p for p in big) >= 3 for n in range(16))


# ------------------------------------------------------------------ bandwidth verdicts

def bench(world_s: float, pair_s: dict[tuple[int, int], float], n: int, size: int = 2**20) -> dict:
    tests = [{"ranks": list(range(n)), "seconds": world_s}]
    tests += [{"ranks": list(p), "seconds": s} for p, s in pair_s.items()]
    return {"backend": "gloo", "world": n, "bytes": size, "iters": 5, "tests": tests}


NAMES3 = ["h1", "h2", "h3"]


def test_the_node_in_every_slow_pair_is_slow_the_others_ok():
    # pairs with h2 take 10x longer: h2 is the slow node; h1 and h3 have a fast pair
    summary = v.bandwidth_summary(bench(0.05, {(0, 1): 0.1, (0, 2): 0.01, (1, 2): 0.1}, 3), NAMES3, None)
    checks = v.bandwidth_checks(summary, NAMES3, TH)
    assert {k: c.status for k, c in checks.items()} == {"h1": "ok", "h2": "slow", "h3": "ok"}
    fast = 2**20 / 0.01 / 1e9
    assert checks["h2"].figure == pytest.approx(fast / 10)
    assert checks["h2"].threshold == pytest.approx(0.5 * fast)
    assert "GB/s" in checks["h2"].detail and "best pair" in checks["h2"].detail


def test_two_nodes_without_a_rating_cannot_say_which_end_is_slow():
    names = ["a", "b"]
    summary = v.bandwidth_summary(bench(1.0, {(0, 1): 1.0}, 2), names, None)
    assert {c.status for c in v.bandwidth_checks(summary, names, TH).values()} == {"ok"}
    only_world = v.bandwidth_summary(bench(0.001, {}, 2), names, 25.0)  # doctor runs no pair test for 2
    checks = v.bandwidth_checks(only_world, names, TH)
    assert {c.status for c in checks.values()} == {"slow"} and checks["a"].figure == pytest.approx(2**20 / 0.001 / 1e9)


def test_rated_network_is_the_reference_when_the_catalog_knows_it():
    names = ["a", "b"]
    # 1 MiB in 1 ms = 1.05 GB/s busbw (n=2); rated 25 Gbit/s = 3.125 GB/s: under half -> slow
    summary = v.bandwidth_summary(bench(0.001, {(0, 1): 0.001}, 2), names, 25.0)
    assert summary["rated_busbw_gbs"] == pytest.approx(3.125)
    checks = v.bandwidth_checks(summary, names, TH)
    assert {c.status for c in checks.values()} == {"slow"}
    assert "rated" in checks["a"].detail
    fast = v.bandwidth_summary(bench(0.0002, {(0, 1): 0.0002}, 2), names, 25.0)
    assert {c.status for c in v.bandwidth_checks(fast, names, TH).values()} == {"ok"}


def test_verdict_failed_beats_slow_beats_ok_and_warnings_do_not_change_it():
    r = v.NodeReport("n", [v.Check("clock", v.WARN, "x"), v.Check("network", v.OK, "y")])
    assert r.verdict == "ok"
    r.checks.append(v.Check("network", v.SLOW, "z"))
    assert r.verdict == "slow"
    r.checks.append(v.Check("shared", v.FAILED, "w"))
    assert r.verdict == "failed" and [c.name for c in r.failed()] == ["shared"]


# ------------------------------------------------------------------ node checks

def probe(**more) -> dict:
    return {"nvml": False, "gpus": [], "xid": None, "dcgm": None, **more}


def gpu(i: int, name: str = "NVIDIA A100-SXM4-80GB", **more) -> dict:
    return {"index": i, "name": name, "ecc_uncorrected": 0, "remap_pending": False, "remap_failed": False, **more}


def test_a_cpu_node_is_reported_as_no_gpu_and_ok():
    (c,) = v.gpu_checks(probe(), 0, None)[:1]
    assert c.status == "ok" and "no GPU" in c.detail


def test_missing_gpus_fail_against_the_expected_count():
    assert v.gpu_checks(probe(), 8, "A100")[0].status == "failed"
    seven = probe(nvml=True, driver="550.54", cuda="12.4", gpus=[gpu(i) for i in range(7)], xid=[])
    checks = {c.name: c for c in v.gpu_checks(seven, 8, "A100")}
    assert checks["gpus"].status == "failed" and checks["gpus"].figure == 7 and "550.54" in checks["gpus"].detail
    eight = probe(nvml=True, gpus=[gpu(i) for i in range(8)], xid=[])
    assert {c.name: c.status for c in v.gpu_checks(eight, 8, "A100")}["gpus"] == "ok"


def test_ecc_remap_fatal_xid_and_dcgm_fail_a_node_model_mismatch_warns():
    p = probe(nvml=True, gpus=[gpu(0, ecc_uncorrected=3), gpu(1, remap_pending=True)],
              xid=["NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus."],
              dcgm={"rc": 1, "failed": True, "tail": "Memory: Fail"})
    checks = {c.name: c.status for c in v.gpu_checks(p, 2, "H100")}
    assert checks == {"gpus": "ok", "gpu_model": "warn", "ecc": "failed", "row_remap": "failed",
                      "xid": "failed", "dcgm": "failed"}


def test_application_xids_only_warn_and_an_unreadable_log_is_skipped():
    app = probe(nvml=True, gpus=[gpu(0)], xid=["NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception"])
    assert {c.name: c.status for c in v.gpu_checks(app, 1, None)}["xid"] == "warn"
    assert {c.name: c.status for c in v.gpu_checks(probe(nvml=True, gpus=[gpu(0)]), 1, None)}["xid"] == "skipped"


def test_disk_under_the_floor_or_missing_fails():
    assert v.disk_check("data_disk", {"path": "/data", "free_bytes": 4 * 2**30, "total_bytes": 1}, TH).status == "failed"
    assert v.disk_check("data_disk", {"path": "/data", "free_bytes": 6 * 2**30, "total_bytes": 1}, TH).status == "ok"
    missing = v.disk_check("data_disk", {"path": "/data", "error": "No such file or directory"}, TH)
    assert missing.status == "failed" and "/data" in missing.detail


def test_shared_mount_missing_unwritable_or_not_shared_fails():
    assert v.shared_check(None, []).status == "skipped"
    missing = v.shared_check({"path": "/mnt/shared", "ok": False, "error": "missing"}, [])
    assert missing.status == "failed" and "/mnt/shared: missing" in missing.detail
    apart = v.shared_check({"path": "/mnt/shared", "ok": True}, ["node-b"])
    assert apart.status == "failed" and "node-b" in apart.detail
    assert v.shared_check({"path": "/mnt/shared", "ok": True}, []).status == "ok"


def test_clock_skew_is_bounded_by_the_round_trip():
    assert v.skew_bounds(100.5, 100.0, 101.0) == 0.0          # inside the round trip: no skew shown
    assert v.skew_bounds(103.0, 100.0, 101.0) == pytest.approx(2.0)
    assert v.skew_bounds(95.0, 100.0, 101.0) == pytest.approx(-5.0)
    assert v.clock_check(0.2, TH).status == "ok"
    assert v.clock_check(-2.0, TH).status == "warn"
    assert v.clock_check(1000.0, TH).status == "failed"


def test_top_reads_the_last_reports_busbw_and_names_the_nodes_not_ok():
    from trainkit.cluster.doctor import busbw_line, node_busbw

    report = {"time": 0, "network": {"backend": "gloo", "world": {"busbw_gbs": 0.25}},
              "nodes": [{"node": "a", "verdict": "ok", "checks": [{"name": "network", "figure": 0.5}]},
                        {"node": "b", "verdict": "slow", "checks": [{"name": "network", "figure": 0.01}]}]}
    line = busbw_line(report)
    assert "gloo all-reduce busbw 0.250 GB/s" in line and "b slow" in line and "a ok" not in line
    assert node_busbw(report) == {"a": 0.5, "b": 0.01}
    assert busbw_line(None) is None and busbw_line({"network": None}) is None and node_busbw(None) == {}


def test_not_seen_fails_the_node_outside_the_biggest_storage_group_only():
    seen = {"a": {"a", "b"}, "b": {"a", "b"}, "c": {"c"}}      # c's folder is its own
    assert v.not_seen(seen) == {"a": [], "b": [], "c": ["a", "b"]}


def test_not_seen_breaks_a_tie_by_the_trusted_node_and_without_one_fails_both():
    seen = {"h1": {"h1"}, "h3": {"h3"}}                       # two nodes, two folders
    assert v.not_seen(seen) == {"h1": ["h3"], "h3": ["h1"]}
    assert v.not_seen(seen, trusted={"h1"}) == {"h1": [], "h3": ["h1"]}   # h1 ran the job: its folder wins


def test_not_seen_a_member_that_misses_another_fails_for_that_one():
    seen = {"a": {"a", "b", "c"}, "b": {"a", "b", "c"}, "c": {"a", "c"}}  # c does not see b's file
    assert v.not_seen(seen) == {"a": [], "b": [], "c": ["b"]}
    assert v.not_seen({}) == {}
