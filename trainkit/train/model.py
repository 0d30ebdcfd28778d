"""Models: the built-in digits CNN and byte-level GPT (gpt.py), and user models by import path.

Model contract (`model: pkg.module:builder`): `builder(**model_args)` returns a `torch.nn.Module`
mapping a float batch `(N, *input_shape)` to class logits `(N, num_classes)`.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from trainkit.errors import InputError
from trainkit.train.config import TrainConfig
from trainkit.train.data import call_builder, resolve_import


class DigitsCNN(nn.Module):
    """A small CNN for 1x8x8 digit images: two 3x3 conv blocks, one pooling, a dropout, a linear head.
    14,698 parameters with the defaults (channels 32, 10 classes); reaches ~98% validation accuracy on scikit-learn digits in a few seconds."""

    def __init__(self, channels: int = 32, dropout: float = 0.1, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout),
                                  nn.Linear(channels * 16, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _gpt(**kwargs: Any) -> nn.Module:
    from trainkit.train.gpt import GPT

    return GPT(**kwargs)


BUILTIN_MODELS: dict[str, Callable[..., Any]] = {"digits_cnn": DigitsCNN, "gpt": _gpt}


def build_model(cfg: TrainConfig) -> nn.Module:
    """The module `cfg.model` names, built with `cfg.model_args` (on CPU; the engine moves it)."""
    builder = resolve_import(cfg.model, BUILTIN_MODELS, "model")
    model = call_builder(builder, "model", cfg.model, **cfg.model_args)
    if not isinstance(model, nn.Module):
        raise InputError(f"model: {cfg.model} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every target: (N, C) vs (N,) or, for sequences, (N, T, C) vs (N, T)."""
    if logits.dtype != torch.float32:   # autocast's bf16/fp16 logits: the loss in fp32
        logits = logits.float()
    if logits.dim() == 2 and y.dim() == 1:   # already (N, C) vs (N,): no view ops for autograd to record and replay
        return F.cross_entropy(logits, y)
    return F.cross_entropy(logits.flatten(0, -2), y.flatten())


@torch.no_grad()
def check_fits(model: nn.Module, ds, cfg: TrainConfig, device: torch.device, n: int = 2,
               split: str = "train") -> tuple[int, ...]:
    """Forward up to `n` training items through `model` (eval mode, nothing changes) and take the
    loss. Raises InputError naming model and data when the model does not take the data's inputs
    or its logits do not fit the labels (shape, dtype, a label >= the number of logits), before
    anything is trained or written (on GPU a bad label would be a device-side assert). Returns
    the shape of one input item (for ONNX export): items 0..n-1 are the only ones read here."""
    from torch.utils.data import default_collate

    try:
        x, y = default_collate([ds[i] for i in range(min(n, len(ds)))])
    except Exception as err:  # noqa: BLE001 - the user's dataset may return anything
        raise InputError(f"data: {cfg.data}'s {split} items are not (input tensor, int label) pairs "
                         f"({type(err).__name__}: {err})", fix="return (x, y) from __getitem__") from None
    was_training = model.training
    model.eval()
    try:
        logits = model(x.to(device))
        classes = logits.shape[-1] if logits.ndim else 0
        if not y.is_floating_point() and y.numel() and not 0 <= int(y.min()) <= int(y.max()) < classes:
            raise ValueError(f"labels {int(y.min())}..{int(y.max())} but {classes} logits per item")
        loss_fn(logits, y.to(device))
    except Exception as err:  # noqa: BLE001 - shapes, dtypes, label range: all the user's input
        raise InputError(f"model: {cfg.model} does not fit data {cfg.data} ({split} set): inputs {tuple(x.shape)} "
                         f"{x.dtype}, labels {tuple(y.shape)} {y.dtype} -> {type(err).__name__}: "
                         f"{str(err).strip().splitlines()[0]}",
                         fix="match model_args (input size, num_classes) to the data") from None
    finally:
        model.train(was_training)
    return tuple(x.shape[1:])


def build_optimizer(model: nn.Module, cfg: TrainConfig, lr: float) -> torch.optim.Optimizer:
    """AdamW or SGD (nesterov) with weight decay on weights only (not biases/norms, as Ultralytics)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim <= 1]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    if cfg.optimizer == "SGD":
        return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, nesterov=True)
    return torch.optim.AdamW(groups, lr=lr, betas=(cfg.momentum, 0.999))
