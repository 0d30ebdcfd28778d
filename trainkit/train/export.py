"""ONNX export of a trained model, verified against PyTorch with onnxruntime.

The model is exported in eval() mode, on CPU, in fp32, with a dynamic batch axis named "batch";
`verify_onnx` runs onnxruntime (CPUExecutionProvider) on two batch sizes and checks
rtol 1e-3 / atol 1e-5 (the PyTorch -> onnxruntime tutorial's tolerances).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch
from torch import nn

from trainkit.errors import TrainkitError, TRAIN

VERIFY_BATCHES = (1, 5)


def export_onnx(model: nn.Module, input_shape: tuple[int, ...], out: Path, opset: int = 18) -> Path:
    """Write `model` (a copy, eval, CPU, fp32) to `out` with input "input" (batch axis dynamic)
    and output "logits". Returns `out`."""
    model = copy.deepcopy(model).to("cpu", torch.float32).eval()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    example = torch.zeros((2, *input_shape))
    names = {"input_names": ["input"], "output_names": ["logits"], "opset_version": opset}
    with torch.no_grad():
        try:  # the torch.export-based exporter (default since torch 2.9)
            torch.onnx.export(model, (example,), str(out), dynamo=True, external_data=False,
                              dynamic_shapes=({0: torch.export.Dim("batch")},), verbose=False, **names)
        except Exception as err:  # models torch.export cannot trace: the TorchScript exporter
            import logging
            logging.getLogger("trainkit.train").warning("dynamo ONNX export failed (%s); "
                                                        "using the TorchScript exporter", err)
            torch.onnx.export(model, (example,), str(out), dynamo=False,
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **names)
    return out


def verify_onnx(model: nn.Module, onnx_path: Path, input_shape: tuple[int, ...],
                rtol: float = 1e-3, atol: float = 1e-5, seed: int = 0) -> dict[str, float]:
    """Compare onnxruntime with PyTorch on random inputs of VERIFY_BATCHES sizes.

    Returns {"max_abs_diff": ..., "batches": [...]}; raises TrainkitError (exit 6) on a mismatch.
    """
    try:
        import onnxruntime as ort
    except ImportError:
        raise TrainkitError("onnxruntime is not installed", fix="pip install 'trainkit[train]'") from None
    model = copy.deepcopy(model).to("cpu", torch.float32).eval()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    for n in VERIFY_BATCHES:
        x = torch.rand((n, *input_shape), generator=gen)
        with torch.no_grad():
            expected = model(x).numpy()
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        try:
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
        except AssertionError as err:
            raise TrainkitError(f"ONNX output differs from PyTorch at batch {n}: {err}",
                                exit_code=TRAIN) from None
        worst = max(worst, float(np.abs(got - expected).max()))
    return {"max_abs_diff": worst, "batches": list(VERIFY_BATCHES)}
