"""Engine pieces without processes: save policy, sampler, keyed dropout, strategy choice, blocks,
monitor advice, device check, the benchmark runner's help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from trainkit.errors import InputError
from trainkit.train import dist, parallel, rng, schedule
from trainkit.train.config import load_config
from trainkit.train.data import GlobalBatchSampler, split_dataset
from trainkit.train.monitor import Monitor
from trainkit.train.sharded import SavePolicy

REPO = Path(__file__).resolve().parents[3]


class FakeSaver:
    last_write_s = 2.0

    def wait(self) -> None:
        pass


def info(world: int = 1, rank: int = 0) -> dist.DistInfo:
    return dist.DistInfo(rank, rank, world, world, torch.device("cpu"))


@pytest.mark.parametrize("start", [0, 137])  # a fresh run and a resumed one
def test_auto_interval_is_measured_on_the_first_step_after_every_start(start):
    now = [0.0]
    policy = SavePolicy(load_config(None, ["checkpoint.mtbf_hours=1"]), info(), clock=lambda: now[0])
    assert policy.due(start + 1)           # first step after this start: save and measure C
    policy.saved(FakeSaver())
    expected = schedule.young_daly_interval(2.0, 3600)
    assert policy.interval == pytest.approx(expected)
    now[0] += expected - 1
    assert not policy.due(start + 2)
    now[0] += 1
    assert policy.due(start + 3)           # and then again at the computed interval


def test_sampler_drops_the_same_remainder_for_every_world_size_without_duplicates():
    n, batch = 127, 16                      # 127 = 7 * 16 + 15: 15 items left out this epoch
    orders = {}
    for world in (1, 2, 4):
        shards = [list(GlobalBatchSampler(n, batch, r, world, seed=3)) for r in range(world)]
        assert all(len(s) == 112 // world for s in shards)
        union = [shards[i % world][i // world] for i in range(112)]  # position p = r + W*k
        assert len(set(union)) == 112
        orders[world] = union
    assert orders[1] == orders[2] == orders[4]
    s = GlobalBatchSampler(n, batch, 0, 1, seed=3)
    s.set_epoch(1)
    assert list(s) != orders[1]            # a new order each epoch


def test_keyed_dropout_masks_do_not_depend_on_how_the_batch_is_split():
    keys = rng.sample_keys(0, 2, torch.arange(8))
    drop = rng.KeyedDropout(0.5, salt=1)
    x = torch.ones(8, 4, 5)
    with rng.keys_for(keys):
        whole = drop(x)
    with rng.keys_for(keys[:3]):
        a = drop(x[:3])
    with rng.keys_for(keys[3:]):
        b = drop(x[3:])
    assert torch.equal(torch.cat([a, b]), whole)
    assert 0.3 < (whole == 0).float().mean() < 0.7
    drop.eval()
    assert torch.equal(drop(x), x)


def test_swap_dropout_replaces_every_plain_dropout():
    model = nn.Sequential(nn.Dropout(0.2), nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.3)))
    assert rng.swap_dropout(model) == 2
    assert [m.p for m in model.modules() if isinstance(m, rng.KeyedDropout)] == [0.2, 0.3]


def test_split_does_not_change_with_the_training_seed():
    cfg_a, cfg_b = load_config(None, ["seed=0"]), load_config(None, ["seed=1"])
    ds = torch.utils.data.TensorDataset(torch.arange(100))
    a, b = (split_dataset(ds, c.split, c.split_seed) for c in (cfg_a, cfg_b))
    assert a["test"].indices == b["test"].indices


def test_strategy_auto_shards_only_what_does_not_fit():
    gib = 1 << 30
    assert schedule.choose_strategy("auto", gib, "AdamW", 80 * gib, 8) == "ddp"
    assert schedule.choose_strategy("auto", 20 * gib, "AdamW", 80 * gib, 8) == "fsdp"  # 80 > 40
    assert schedule.choose_strategy("auto", 20 * gib, "AdamW", 80 * gib, 1) == "ddp"
    assert schedule.choose_strategy("fsdp", 1, "SGD", gib, 2) == "fsdp"


def test_blocks_by_class_name_and_by_size():
    from trainkit.train.gpt import GPT, Block

    model = GPT(block_size=8, n_layer=3, n_head=2, n_embd=16)
    named = parallel.block_modules(model, ["Block"], 1)
    assert len(named) == 3 and all(isinstance(b, Block) for b in named)
    block_params = sum(p.numel() for p in named[0].parameters())
    auto = parallel.block_modules(model, "auto", block_params)
    assert model not in auto and all(b in auto for b in named)  # and any other module as big
    assert model.pos not in auto                                 # but not the small ones


def test_monitor_suggests_fewer_workers_when_the_wait_is_hand_off(tmp_path):
    mon = Monitor(tmp_path, False, 100, False, None)
    for _ in range(10):
        mon.step(1, 0, 1.0, 0.1, step_s=0.010, wait_s=0.004, batch=8)
    assert "lower workers (now 4" in mon.verdict(4, 8, load_s=0.0005)
    assert "raise workers" in mon.verdict(2, 8, load_s=0.010)


def test_device_cuda_without_a_gpu_is_a_config_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the error cannot happen here")
    with pytest.raises(InputError, match="device: 'cuda'.*no usable CUDA GPU"):
        dist.setup("cuda")


def test_benchmarks_help_runs_nothing():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "usage: python -m benchmarks" in proc.stdout
    assert "==" not in proc.stdout  # no benchmark printed a header
    bad = subprocess.run([sys.executable, "-m", "benchmarks", "nope"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown benchmark" in bad.stderr


def test_activation_checkpointing_recomputes_the_same_keyed_dropout_masks():
    import copy

    from trainkit.train.gpt import GPT

    torch.manual_seed(0)
    plain = GPT(block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.5)
    rng.swap_dropout(plain)
    recomputed = copy.deepcopy(plain)
    parallel.checkpoint_blocks(parallel.block_modules(recomputed, ["Block"], 1))
    x = torch.randint(0, 256, (4, 8))
    for model in (plain, recomputed):
        with rng.keys_for(rng.sample_keys(0, 0, torch.arange(4))):
            loss = model(x).logsumexp(-1).mean()
        loss.backward()  # the recompute runs here, outside keys_for
    for (name, a), b in zip(plain.named_parameters(), recomputed.parameters()):
        assert torch.equal(a.grad, b.grad), name


# The default `amp: true, amp_dtype: auto` on a CPU: both answers of the bf16 probe are tried here,
# so this does not depend on the CPU the tests run on (the probe itself is oneDNN's).
@pytest.mark.parametrize("native,want,expected", [
    (True, "auto", torch.bfloat16), (False, "auto", None),
    (True, "bf16", torch.bfloat16), (False, "bf16", torch.bfloat16)])
def test_cpu_autocast_dtype_follows_the_probe_only_when_auto(native, want, expected, caplog):
    from trainkit.train.run import pick_amp_dtype

    with caplog.at_level("INFO", logger="trainkit.train"):
        got = pick_amp_dtype(True, torch.device("cpu"), want, native_bf16=lambda: native)
    assert got == expected
    assert ("bf16 autocast on CPU" if expected else "training in fp32") in caplog.text


def test_amp_off_is_fp32_and_fp16_on_a_cpu_is_a_config_error():
    from trainkit.train.run import pick_amp_dtype

    cpu = torch.device("cpu")
    assert pick_amp_dtype(False, cpu, "bf16", native_bf16=lambda: True) is None
    with pytest.raises(InputError, match="amp_dtype"):
        pick_amp_dtype(True, cpu, "fp16")
    assert load_config(None, []).amp_dtype == "auto"
    with pytest.raises(InputError, match="amp_dtype"):
        load_config(None, ["amp_dtype=fp8"])


@pytest.mark.parametrize("p", [0.1, 0.5, 1 / 3, 0.25, 0.9999, 1e-7])
def test_keyed_dropouts_integer_threshold_keeps_exactly_what_the_uniform_comparison_keeps(p):
    # the mask is compared on the hash bits (one pass) instead of a float32 uniform: not one
    # element may differ, or resumed and earlier runs would draw other masks
    keys = rng.sample_keys(7, 3, torch.arange(64))
    shape = torch.Size([64, 8, 33])
    old = ((rng.keyed_bits(keys, shape, 2) >> 8).to(torch.float32) * (1.0 / (1 << 24))).reshape(shape) >= p
    new = (rng.keyed_bits(keys, shape, 2) >= rng.keep_threshold(p)).reshape(shape)
    assert torch.equal(old, new)
    edge = rng.keep_threshold(p) >> 8   # the top-24-bit values on both sides of the threshold
    top = torch.arange(max(edge - 4096, 0), min(edge + 4096, 2**24), dtype=torch.int64)
    values = torch.cat([top << 8, (top << 8) + 255])
    as_uniform = (values >> 8).to(torch.float32) * (1.0 / (1 << 24)) >= p
    assert torch.equal(as_uniform, values >= rng.keep_threshold(p)) and as_uniform.any() and not as_uniform.all()


def test_in_place_mix_equals_mix():
    x = torch.randint(0, 2**32, (1000,), dtype=torch.int64)
    assert torch.equal(rng._mix_(x.clone()), rng.mix(x))


@pytest.mark.parametrize("p", [0.1, 0.5, 1 / 3, 0.9999, 1e-7, 1.0])
@pytest.mark.parametrize("shape", [(64, 512), (3, 7, 11), (1, 1)])
def test_the_32_bit_keep_mask_is_the_int64_comparison(p, shape):
    # the dropout layers compute their masks on int32/uint32 lanes; every element must equal the
    # reference (int64 hashes against the integer threshold), or runs would draw other masks
    shape = torch.Size(shape)
    for seed, salt in [(7, 2), (0, 0), (2**40 + 3, 5)]:
        keys = rng.sample_keys(seed, 3, torch.arange(shape[0]) * 977)
        want = rng.keyed_bits(keys, shape, salt) >= rng.keep_threshold(p)
        assert torch.equal(rng.keep_mask(keys, shape, salt, p), want)
        # the factor a dropout multiplies by, made without a boolean tensor: 0 or the scale
        scale = 1.0 / (1.0 - p) if p < 1 else 0.0
        assert torch.equal(rng.keep_scale(keys, shape, salt, p), want.to(torch.float32).mul_(scale))
    drop = rng.KeyedDropout(p, salt=1)
    want = rng.keyed_bits(keys, shape, 1) >= rng.keep_threshold(p)
    x = torch.randn(shape)
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        with rng.keys_for(keys):
            out = drop(x.to(dtype))
        # what the layer computed before the factor was made from bits: x * keep.to(dtype) * scale
        reference = x.to(dtype) * want.reshape(shape).to(dtype).mul_(scale)
        assert out.dtype == dtype and torch.equal(out, reference), dtype
    assert (out == 0).all() if p == 1.0 else ((out != 0).any() or p > 0.5)


@pytest.mark.parametrize("accum", [1, 2])
def test_run_keys_come_from_a_block_but_equal_the_per_step_hash(accum):
    from trainkit.train import dist
    from trainkit.train.run import KEY_BLOCK, build_run

    run = build_run(load_config(None, ["batch=8", f"grad_accum={accum}", "workers=0"]), dist.setup("cpu"))
    micro = run.plan.micro
    assert run.plan.accum == accum
    last = KEY_BLOCK // accum   # the step whose micro-batches end the first block, then the next
    for epoch, step in [(0, 0), (0, 1), (0, last - 1), (0, last), (0, KEY_BLOCK + 3), (0, 2), (1, 2)]:
        run.epoch, run.step_in_epoch = epoch, step
        for m in range(accum):
            k0 = step * run.plan.per_rank + m * micro
            want = rng.sample_keys(run.cfg.seed, epoch, torch.arange(k0, k0 + micro))
            keys, seed = run.keys(m)
            assert torch.equal(keys, want) and seed == int(want[0]), (epoch, step, m)
