"""Batch split, LR scaling, warmup/decay and Young/Daly arithmetic."""

from __future__ import annotations

import math

import pytest

from trainkit.errors import InputError
from trainkit.train.schedule import (
    lr_factor,
    plan_batch,
    scaled_lr,
    suggested_workers,
    warmup_steps,
    young_daly_interval,
)


@pytest.mark.parametrize("world, micro_max, accum, expect", [
    (1, None, "auto", (64, 64, 1)),
    (2, None, "auto", (32, 32, 1)),
    (4, 8, "auto", (16, 8, 2)),
    (2, 10, "auto", (32, 8, 4)),     # 32 per rank, micro <= 10: the fewest divisor steps is 4 (8 each)
    (2, None, 4, (32, 8, 4)),
    (8, 3, "auto", (8, 2, 4)),
])
def test_global_batch_is_split_exactly(world, micro_max, accum, expect):
    plan = plan_batch(64, world, micro_max, accum)
    assert (plan.per_rank, plan.micro, plan.accum) == expect
    assert plan.micro * plan.accum * plan.world_size == 64


def test_global_batch_not_divisible_by_world_is_an_input_error():
    with pytest.raises(InputError, match="not divisible by world size 3"):
        plan_batch(64, 3)


def test_accum_that_does_not_divide_is_an_input_error():
    with pytest.raises(InputError, match="grad_accum=3"):
        plan_batch(64, 2, None, 3)


def test_explicit_accum_that_overflows_micro_batch_is_an_input_error():
    with pytest.raises(InputError, match="exceeds micro_batch"):
        plan_batch(64, 1, 16, 2)


def test_lr_scales_linearly_with_global_batch():
    assert scaled_lr(0.01, 256, 64) == pytest.approx(0.04)
    assert scaled_lr(0.01, 32, 64) == pytest.approx(0.005)
    assert scaled_lr(0.01, 256, 64, "sqrt") == pytest.approx(0.02)
    assert scaled_lr(0.01, 256, 64, "none") == 0.01


def test_warmup_uses_the_ultralytics_floor_on_long_runs():
    assert warmup_steps(1.0, 19, 10_000) == 100      # max(19, 100)
    assert warmup_steps(3.0, 500, 100_000) == 1500   # epochs win over the floor


def test_warmup_floor_never_exceeds_a_tenth_of_a_tiny_run():
    assert warmup_steps(1.0, 5, 40) == 5             # floor min(100, 4) = 4 < 5 asked
    assert warmup_steps(0.1, 5, 40) == 4             # floor capped at 10% of 40
    assert warmup_steps(10.0, 19, 100) == 50         # any warmup capped at half the run
    assert warmup_steps(0.0, 19, 100) == 0


def test_lr_factor_warms_up_linearly_then_decays_to_lrf():
    total, warm, lrf = 100, 10, 0.01
    f = [lr_factor(s, warm, total, lrf) for s in range(total)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert f[10] == pytest.approx(1.0) and f[-1] == pytest.approx(lrf)
    assert all(a >= b for a, b in zip(f[10:], f[11:]))
    cos = [lr_factor(s, warm, total, lrf, cosine=True) for s in range(total)]
    assert cos[10] == pytest.approx(1.0) and cos[-1] == pytest.approx(lrf)
    mid = 10 + (total - 11) // 2
    assert cos[mid] > f[mid] - 0.05  # cosine stays high longer than linear around the middle


def test_young_daly_matches_the_worked_numbers():
    # Young 1974 (CACM 17(9):530-531) and Daly 2006 (FGCS 22(3):303-312), formulas in docs/training.md:
    # C=30 s, M=6 h -> Young 19.0 min, Daly 18.7 min (the exact Daly
    # value is 18.64 min: sqrt(2CM)*(1 + sqrt(C/2M)/3 + C/18M) - C; the table rounds up)
    assert young_daly_interval(30, 6 * 3600, higher_order=False) / 60 == pytest.approx(19.0, abs=0.05)
    assert young_daly_interval(30, 6 * 3600) / 60 == pytest.approx(18.64, abs=0.01)
    assert young_daly_interval(6, 6 * 3600) / 60 == pytest.approx(8.4, abs=0.05)
    # C=120 s, M=24 h -> 76 / 75 min
    assert young_daly_interval(120, 86400, higher_order=False) / 60 == pytest.approx(75.9, abs=0.1)
    assert young_daly_interval(120, 86400) / 60 == pytest.approx(75.0, abs=0.5)


def test_young_daly_is_m_when_the_save_is_longer_than_twice_m():
    assert young_daly_interval(500, 200) == 200


def test_young_daly_grows_with_sqrt_of_save_time():
    a, b = young_daly_interval(1, 3600, False), young_daly_interval(4, 3600, False)
    assert b / a == pytest.approx(2.0) and a == pytest.approx(math.sqrt(7200))


def test_suggested_workers_is_lightnings_bound():
    assert suggested_workers(2, 1) == 1
    assert suggested_workers(2, 2) == 1
    assert suggested_workers(16, 2) == 7
    assert suggested_workers(64, 8) == 7
