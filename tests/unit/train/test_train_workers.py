"""`workers: auto`: 0 for in-memory data, otherwise the fastest measured count."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset, Subset, TensorDataset

from trainkit.train import workers

pytestmark = pytest.mark.unit


class OnDisk(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.zeros(2), i % 2


class Flagged(OnDisk):
    in_memory = True


def test_a_tensor_dataset_inside_subsets_is_in_memory():
    ds = TensorDataset(torch.zeros(10, 2), torch.zeros(10))
    assert workers.in_memory(Subset(Subset(ds, range(8)), range(4)))
    assert workers.in_memory(Flagged()) and not workers.in_memory(Subset(OnDisk(), range(4)))


def test_in_memory_data_gets_zero_workers_without_measuring(monkeypatch):
    monkeypatch.setattr(workers, "measure", lambda *a, **k: pytest.fail("measured in-memory data"))
    assert workers.choose(TensorDataset(torch.zeros(10, 2)), 4, bound=3) == 0


def test_the_fewest_workers_within_five_percent_of_the_fastest_win():
    assert workers.pick({0: 2.0, 1: 1.0, 2: 0.98, 3: 1.2}) == 1
    assert workers.pick({0: 1.0, 1: 1.5}) == 0


def test_measuring_stops_once_another_worker_is_slower():
    calls = []

    def fake(n):
        calls.append(n)
        return {0: 3.0, 1: 1.0, 2: 2.0, 3: 0.1}[n]

    assert workers.measure(OnDisk(), 8, bound=3, time_one=fake) == {0: 3.0, 1: 1.0, 2: 2.0}
    assert calls == [0, 1, 2]


def test_other_data_is_measured_for_real_and_the_choice_is_a_valid_count(monkeypatch):
    seen = {}
    real = workers.measure

    def spy(ds, batch, bound, time_one=None):
        seen["timings"] = real(ds, batch, bound)
        return seen["timings"]

    monkeypatch.setattr(workers, "measure", spy)
    n = workers.choose(OnDisk(), 8, bound=1)
    assert n in seen["timings"] and n in (0, 1) and 0 in seen["timings"]


def test_rank_zeros_choice_is_what_every_rank_uses():
    assert workers.choose(OnDisk(), 8, bound=1, is_main=False, share=lambda _: (1, "rank 0")) == 1
