"""ONNX export of a trained model, verified against PyTorch with onnxruntime.

The model is exported in eval() mode, on CPU, in fp32, with a dynamic batch axis named "batch", at
exactly the configured opset (13 and up), carrying metadata_props a deployment reads;
`verify_onnx` runs onnxruntime (CPUExecutionProvider) on two batch sizes and checks
rtol 1e-3 / atol 1e-5 (the PyTorch -> onnxruntime tutorial's tolerances).
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import numpy as np
import torch
from torch import nn

import trainkit
from trainkit.errors import TRAIN, InputError, TrainkitError
from trainkit.util.dist import pip_install

log = logging.getLogger("trainkit.train")

VERIFY_BATCHES = (1, 5)


MIN_OPSET = 13  # the lowest opset trainkit promises (deployment guides commonly pin 13)


def export_onnx(model: nn.Module, input_shape: tuple[int, ...], out: Path, opset: int = 18,
                metadata: dict[str, str] | None = None) -> Path:
    """Write `model` (a copy, eval, CPU, fp32) to `out` with input "input" (batch axis dynamic),
    output "logits", exactly opset `opset`, and `metadata` (plus input/output names and shape) in
    the model's metadata_props. Tries the torch.export-based exporter, then the TorchScript one
    (which still writes opsets below 18). Raises InputError naming export.opset when neither
    writes the requested opset. Returns `out`."""
    check_opset(opset)
    model = copy.deepcopy(model).to("cpu", torch.float32).eval()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    example = torch.zeros((2, *input_shape))
    got = []
    for exporter in (_export_dynamo, _export_torchscript):
        try:
            with torch.no_grad():
                exporter(model, example, out, opset)
        except Exception as err:  # a model one exporter cannot trace: try the next
            log.warning("%s ONNX export failed (%s)", exporter.__name__.removeprefix("_export_"), err)
            continue
        produced = written_opset(out)
        if produced == opset:
            _add_metadata(out, input_shape, metadata or {})
            return out
        got.append(produced)
    raise InputError(f"export.opset: {opset} cannot be produced by torch {torch.__version__}'s ONNX "
                     f"exporters (they wrote opset {', '.join(map(str, got)) or 'nothing'})",
                     fix=f"set export.opset between {MIN_OPSET} and {max_opset()}")


def check_opset(opset: int) -> None:
    """InputError naming export.opset unless MIN_OPSET <= opset <= the onnx package's newest (run
    at start-up when export.onnx is on, so a typo fails before training, not after it)."""
    if not MIN_OPSET <= opset <= max_opset():
        raise InputError(f"export.opset: {opset} is outside {MIN_OPSET}..{max_opset()} (the onnx "
                         "package's newest)", fix=f"set export.opset between {MIN_OPSET} and {max_opset()}")


def max_opset() -> int:
    """The newest opset both the onnx package and onnxruntime-era exporters know (onnx's own)."""
    import onnx

    return onnx.defs.onnx_opset_version()


def written_opset(path: Path) -> int | None:
    """The default-domain opset of the ONNX file at `path`."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)


def _export_dynamo(model: nn.Module, example: torch.Tensor, out: Path, opset: int) -> None:
    torch.onnx.export(model, (example,), str(out), dynamo=True, external_data=False,
                      dynamic_shapes=({0: torch.export.Dim("batch")},), verbose=False,
                      input_names=["input"], output_names=["logits"], opset_version=opset)


def _export_torchscript(model: nn.Module, example: torch.Tensor, out: Path, opset: int) -> None:
    torch.onnx.export(model, (example,), str(out), dynamo=False, input_names=["input"],
                      output_names=["logits"], opset_version=opset,
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def _add_metadata(path: Path, input_shape: tuple[int, ...], extra: dict[str, str]) -> None:
    """metadata_props: input_name, input_shape (JSON, "batch" first), output_names, versions, extra."""
    import onnx

    proto = onnx.load(str(path))
    props = {"input_name": "input", "input_shape": json.dumps(["batch", *input_shape]),
             "output_names": json.dumps(["logits"]), "torch_version": torch.__version__,
             "trainkit_version": trainkit.__version__, **{k: str(v) for k, v in extra.items()}}
    onnx.helper.set_model_props(proto, props)
    proto.producer_name = proto.producer_name or "trainkit"
    onnx.save(proto, str(path))


def read_metadata(path: Path) -> dict[str, str]:
    """The metadata_props of an ONNX file as a dict."""
    import onnx

    return {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}


def verify_onnx(model: nn.Module, onnx_path: Path, input_shape: tuple[int, ...],
                rtol: float = 1e-3, atol: float = 1e-5, seed: int = 0) -> dict[str, float]:
    """Compare onnxruntime with PyTorch on random inputs of VERIFY_BATCHES sizes.

    Returns {"max_abs_diff": ..., "batches": [...]}; raises TrainkitError (exit 6) on a mismatch.
    """
    try:
        import onnxruntime as ort
    except ImportError:
        raise TrainkitError("onnxruntime is not installed", fix=pip_install("train")) from None
    model = copy.deepcopy(model).to("cpu", torch.float32).eval()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    for n in VERIFY_BATCHES:
        x = torch.rand((n, *input_shape), generator=gen)
        with torch.no_grad():
            expected = model(x).numpy()
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        if got.shape != expected.shape or not np.allclose(got, expected, rtol=rtol, atol=atol):
            diff = float(np.abs(got - expected).max()) if got.shape == expected.shape else float("nan")
            raise TrainkitError(f"ONNX output differs from PyTorch at batch {n}: shapes {got.shape} vs "
                                f"{expected.shape}, max abs diff {diff:.3g} (rtol {rtol}, atol {atol}); "
                                "a common cause: Python control flow on tensor values in forward(), "
                                "which export traces as one branch", exit_code=TRAIN)
        worst = max(worst, float(np.abs(got - expected).max()))
    return {"max_abs_diff": worst, "batches": list(VERIFY_BATCHES)}
