"""ONNX export with a dynamic batch axis, checked against PyTorch with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from click.testing import CliRunner

from trainkit.errors import TrainkitError
from trainkit.train import checkpoint as ckpt
from trainkit.train.config import load_config
from trainkit.train.export import export_onnx, verify_onnx
from trainkit.train.model import DigitsCNN

SHAPE = (1, 8, 8)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    model = DigitsCNN()
    path = export_onnx(model, SHAPE, tmp_path_factory.mktemp("onnx") / "model.onnx")
    return model, path


@pytest.mark.parametrize("batch", [1, 3, 17])
def test_onnxruntime_matches_pytorch_at_any_batch_size(exported, batch):
    model, path = exported
    x = torch.rand((batch, *SHAPE), generator=torch.Generator().manual_seed(batch))
    with torch.no_grad():
        expected = model.eval()(x).numpy()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x.numpy()})[0]
    assert got.shape == (batch, 10)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-5)


def test_the_batch_axis_is_dynamic_in_the_graph(exported):
    import onnx

    graph = onnx.load(str(exported[1])).graph
    dim = graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param and not dim.dim_value


def test_verify_reports_the_worst_difference_on_two_batch_sizes(exported):
    model, path = exported
    check = verify_onnx(model, path, SHAPE)
    assert len(check["batches"]) == 2 and check["max_abs_diff"] < 1e-5


def test_verify_fails_when_the_onnx_model_is_not_the_model(exported):
    _, path = exported
    torch.manual_seed(1)
    with pytest.raises(TrainkitError, match="differs from PyTorch"):
        verify_onnx(DigitsCNN(), path, SHAPE)


def test_export_command_rebuilds_the_model_from_a_checkpoint(tmp_path):
    from trainkit.commands.run import export

    cfg = load_config(None)
    torch.manual_seed(0)
    model = DigitsCNN(**cfg.model_args)
    state = {"step": 7, "model": model.state_dict(), "config": cfg.to_dict(), "input_shape": SHAPE}
    ckpt.save_single(tmp_path / "ckpt", state, step=7)
    out = tmp_path / "m.onnx"
    result = CliRunner().invoke(export, [str(tmp_path / "ckpt"), "--onnx", str(out), "--verify"])
    assert result.exit_code == 0, result.output
    assert "step 7" in result.output and "onnxruntime matches PyTorch" in result.output
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((4, *SHAPE), dtype=np.float32)
    with torch.no_grad():
        expected = model.eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(session.run(None, {"input": x})[0], expected, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 18])
def test_the_file_has_exactly_the_configured_opset_and_runs_in_onnxruntime(tmp_path, opset):
    from trainkit.train.export import written_opset

    torch.manual_seed(0)
    model = DigitsCNN()
    path = export_onnx(model, SHAPE, tmp_path / f"m{opset}.onnx", opset)
    assert written_opset(path) == opset
    assert verify_onnx(model, path, SHAPE)["max_abs_diff"] < 1e-5


def test_the_model_carries_the_metadata_a_deployment_reads(tmp_path):
    import json

    import trainkit
    from trainkit.train.export import read_metadata

    path = export_onnx(DigitsCNN(), SHAPE, tmp_path / "m.onnx", 13,
                       {"run_id": "digits-20261130-1200", "class_names": json.dumps(["0", "1"])})
    meta = read_metadata(path)
    assert meta["run_id"] == "digits-20261130-1200" and json.loads(meta["class_names"]) == ["0", "1"]
    assert meta["input_name"] == "input" and json.loads(meta["input_shape"]) == ["batch", 1, 8, 8]
    assert json.loads(meta["output_names"]) == ["logits"]
    assert meta["torch_version"] == torch.__version__ and meta["trainkit_version"] == trainkit.__version__
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_modelmeta().custom_metadata_map["run_id"] == "digits-20261130-1200"


@pytest.mark.parametrize("opset", [12, 999])
def test_an_opset_the_exporter_cannot_write_is_a_clear_input_error(tmp_path, opset):
    from trainkit.errors import InputError

    with pytest.raises(InputError, match="export.opset") as err:
        export_onnx(DigitsCNN(), SHAPE, tmp_path / "m.onnx", opset)
    assert "13" in err.value.fix


def test_the_config_rejects_an_opset_below_13():
    from trainkit.errors import InputError

    with pytest.raises(InputError, match="export.opset"):
        load_config(None, ["export.opset=11"])
