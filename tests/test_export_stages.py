"""kiln.export in stages: trace -> run_passes -> lower -> serialize / write_program.

Each stage's output can be looked at; chained, the stages make the same bytes as
the one-call kiln.export.export; an ExportedProgram of the user's own goes in;
bytes come out without a path and load; a failed export writes nothing.
"""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

import kiln
import kiln.export
from kiln.errors import ExportError, UnsupportedOperatorError

from conftest import assert_close

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class ConvBlock(nn.Module):
    """conv -> batch norm -> relu (one fused_conv2d after the passes), and a second method."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))

    def classify(self, features):
        return self.head(features)


def _model():
    torch.manual_seed(0)
    return ConvBlock().eval()


X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
F = torch.randn(5, 8, generator=torch.Generator().manual_seed(2))


def _ops(graph):
    return [str(n.target) for n in graph.nodes if n.op == "call_function"]


def test_each_stage_output_can_be_inspected():
    model = _model()
    traced = kiln.export.trace(model, (X,), methods={"classify": (F,)})
    assert isinstance(traced, kiln.export.TracedProgram)
    assert list(traced.methods) == ["forward", "classify"]
    forward = traced.methods["forward"]
    assert isinstance(forward.exported, torch.export.ExportedProgram)
    assert forward.input_names == ["x"] and traced.methods["classify"].input_names == ["features"]
    before = str(forward.exported.graph)
    assert "batch_norm" in before  # torch.export's graph, as traced

    ctx = forward.decompose()
    assert isinstance(ctx, kiln.export.PassContext)
    assert ctx.input_names == ["x"] and len(ctx.user_inputs) == 1 and ctx.constants

    passed = kiln.export.run_passes(traced)
    assert isinstance(passed, kiln.export.PassedProgram) and passed.optimize
    graph = passed.methods["forward"].graph
    assert _ops(graph) == ["kiln.fused_conv2d.default"], _ops(graph)
    assert passed.methods["forward"].fused == {("batch_norm", "conv2d"): 1, ("relu", "conv2d"): 1}
    assert "1 batch norm folded into conv2d; 1 relu into conv2d" in str(passed)
    assert str(forward.exported.graph) == before  # the passes rewrote a copy

    program = kiln.export.lower(passed)
    assert isinstance(program, kiln.export.ProgramIR)
    fwd, cls = program.methods
    assert fwd.operator_keys() == ["kiln::fused_conv2d.default"]
    assert cls.operator_keys() == ["aten::linear.default"]
    # The memory plan: the output lives in the arena, within its planned size.
    out = fwd.values[fwd.outputs[0]]
    assert out.arena == 0 and out.arena_offset + out.nbytes <= fwd.arena_sizes[0]
    assert out.nbytes == 2 * 8 * 8 * 8 * 4
    assert "method 'forward': 1 instructions" in str(program) and f"arenas {fwd.arena_sizes}" in str(program)

    data = kiln.export.serialize(program)
    from kiln.export.lowering.serialize import parse_header

    assert parse_header(data).file_size == len(data)
    loaded = kiln.load(data)
    assert loaded.method_names == ["forward", "classify"]
    with torch.no_grad():
        assert_close(loaded.forward(X.numpy())[0], model(X).numpy(), 1e-4)
        assert_close(loaded.classify(F.numpy())[0], model.classify(F).numpy(), 1e-4)


def test_stages_chained_equal_the_one_call_export_byte_for_byte(tmp_path):
    model = _model()
    options = dict(methods={"classify": (F,)})
    metadata = {"note": "stages", "blob": b"\x00\x01"}
    report = kiln.export.export(model, (X,), tmp_path / "one.kiln", metadata=metadata, **options)
    one_call = (tmp_path / "one.kiln").read_bytes()
    assert report.file_size == len(one_call) and report.data is None

    traced = kiln.export.trace(model, (X,), **options)
    program = kiln.export.lower(kiln.export.run_passes(traced), metadata=metadata)
    assert kiln.export.serialize(program) == one_call
    assert kiln.export.write_program(program, tmp_path / "staged.kiln") == len(one_call)
    assert (tmp_path / "staged.kiln").read_bytes() == one_call

    # The same trace through the passes again, without the fusions: what export(optimize=False) writes.
    unfused = kiln.export.serialize(kiln.export.lower(kiln.export.run_passes(traced, optimize=False),
                                                      metadata=metadata))
    kiln.export.export(model, (X,), tmp_path / "unfused.kiln", metadata=metadata, optimize=False, **options)
    assert unfused == (tmp_path / "unfused.kiln").read_bytes() != one_call


def test_an_exported_program_is_accepted(tmp_path):
    model = _model()
    batch = torch.export.Dim("batch", min=1, max=4)
    ep = torch.export.export(model, (X,), dynamic_shapes=({0: batch},))
    report = kiln.export.export(ep, None, tmp_path / "ep.kiln")
    assert report.methods["forward"].fused == {("batch_norm", "conv2d"): 1, ("relu", "conv2d"): 1}
    method = kiln.load(tmp_path / "ep.kiln").method("forward")
    assert [s.name for s in method.input_specs] == ["x"] and method.input_specs[0].dynamic_dims == (0,)
    x3 = torch.randn(3, 3, 8, 8)
    with torch.no_grad():
        assert_close(method(x3.numpy())[0], model(x3).numpy(), 1e-4)
    # The stages take it too, and make the same file.
    assert kiln.export.serialize(kiln.export.lower(kiln.export.run_passes(kiln.export.trace(ep)))) == \
        (tmp_path / "ep.kiln").read_bytes()

    with pytest.raises(ExportError, match="example_inputs, dynamic_shapes cannot be given with it"):
        kiln.export.trace(ep, (X,), dynamic_shapes=({0: batch},))
    with pytest.raises(ExportError, match=r"goes through trace\(\) first"):
        kiln.export.run_passes(ep)


def test_export_without_a_path_returns_the_bytes_and_they_load(tmp_path, monkeypatch):
    model = _model()
    monkeypatch.chdir(tmp_path)
    report = kiln.export.export(model, (X,), None)
    assert os.listdir(tmp_path) == []
    assert report.path is None and isinstance(report.data, bytes) and report.file_size == len(report.data)
    assert report.data == kiln.export.serialize(kiln.export.lower(kiln.export.run_passes(
        kiln.export.trace(model, (X,)))))
    assert "in memory" in str(report)
    assert sum(report.methods["forward"].kernel_tiers.values()) == 1  # loaded here, from the bytes
    with torch.no_grad():
        assert_close(kiln.load(report.data).forward(X.numpy())[0], model(X).numpy(), 1e-4)


def test_unsupported_operators_pass_the_passes_and_stop_at_lower():
    class Prefix(nn.Module):
        def forward(self, x):
            return torch.logcumsumexp(x, dim=1)

    passed = kiln.export.run_passes(kiln.export.trace(Prefix(), (torch.randn(2, 8),)))
    assert "aten.logcumsumexp.default" in _ops(passed.methods["forward"].graph)
    with pytest.raises(UnsupportedOperatorError, match="aten::logcumsumexp.default: 1 call") as info:
        kiln.export.lower(passed)
    assert info.value.operators == ["aten::logcumsumexp.default"]


def _failing_pass(ctx):
    raise RuntimeError("this pass fails on purpose")


def test_a_failing_export_writes_nothing(tmp_path):
    model = _model()
    path = tmp_path / "model.kiln"
    with pytest.raises(ExportError, match="_failing_pass.*fails on purpose"):
        kiln.export.export(model, (X,), path, passes=[_failing_pass])
    assert os.listdir(tmp_path) == []

    # Over an existing file: the failure leaves it as it was.
    path.write_bytes(b"the previous program")
    with pytest.raises(ExportError):
        kiln.export.export(model, (X,), path, passes=[_failing_pass])
    assert os.listdir(tmp_path) == ["model.kiln"] and path.read_bytes() == b"the previous program"


def test_a_write_that_fails_half_way_leaves_no_file(tmp_path, monkeypatch):
    """The disk filling up after the header: neither a partial file nor the temporary one is left,
    and the file that was at the path is untouched."""
    from kiln.export.lowering import serialize

    written = serialize._write

    def full_disk(program, f):
        f.write(b"KILNPRG\0" + b"\0" * 56)
        raise OSError(28, "No space left on device")

    model = _model()
    path = tmp_path / "model.kiln"
    monkeypatch.setattr(serialize, "_write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        kiln.export.export(model, (X,), path)
    assert os.listdir(tmp_path) == []
    path.write_bytes(b"the previous program")
    with pytest.raises(OSError, match="No space left"):
        kiln.export.export(model, (X,), path)
    assert os.listdir(tmp_path) == ["model.kiln"] and path.read_bytes() == b"the previous program"

    monkeypatch.setattr(serialize, "_write", written)
    kiln.export.export(model, (X,), path)
    assert os.listdir(tmp_path) == ["model.kiln"] and kiln.load(path).method_names == ["forward"]


def test_import_paths_of_the_public_names():
    """The names users import stay where the docs say they are."""
    import dataclasses
    import types

    from kiln.export import PassContext, compare, export  # noqa: F401
    from kiln.export.quantize import QuantizedEmbedding, QuantizedLinear, from_gguf_blocks, quantize  # noqa: F401

    fields = {f.name for f in dataclasses.fields(PassContext)}
    assert {"graph", "constants", "user_inputs", "input_names", "fused", "state", "mutated",
            "input_symbol_bounds", "symbol_ranges"} <= fields
    assert isinstance(quantize, types.FunctionType)  # the function, not its package
