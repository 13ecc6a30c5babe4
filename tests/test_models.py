"""Exported programs give eager PyTorch's results (within 1e-4 of the output's scale)
and plan memory below the naive sum."""

import numpy as np
import pytest
import torch

import kiln

from conftest import KERNEL_CHOICE_IDS, KERNEL_CHOICES, assert_close

TOLERANCE = 1e-4


def run_both(exported, name, method="forward", inputs=None, load_options=None):
    path, model, example, _ = exported(name)
    inputs = inputs if inputs is not None else example
    program = kiln.load(path, **(load_options or {}))
    got = program.method(method).run(*[t.numpy() for t in inputs])
    with torch.no_grad():
        want = getattr(model, method)(*inputs)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    return got, [w.numpy() for w in want]


@pytest.mark.parametrize("load_options", KERNEL_CHOICES, ids=KERNEL_CHOICE_IDS)
@pytest.mark.parametrize("name", ["mlp", "cnn", "cnn_unfused", "encoder", "tied"])
def test_matches_eager(exported, name, load_options):
    got, want = run_both(exported, name, load_options=load_options)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert_close(g, w, TOLERANCE)


@pytest.mark.parametrize("load_options", KERNEL_CHOICES, ids=KERNEL_CHOICE_IDS)
@pytest.mark.parametrize("name", ["mlp", "cnn", "encoder"])
def test_matches_eager_on_fresh_inputs(exported, name, load_options):
    # Same program, other values: nothing of the example input is baked in.
    _, _, example, _ = exported(name)
    torch.manual_seed(123)
    fresh = tuple(torch.randn_like(t) * 3 for t in example)
    got, want = run_both(exported, name, inputs=fresh, load_options=load_options)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, TOLERANCE)


def test_repeated_runs_are_identical(exported):
    path, _, example, _ = exported("cnn")
    method = kiln.load(path).method("forward")
    x = example[0].numpy()
    first = method.run(x)[0]
    for _ in range(3):
        np.testing.assert_array_equal(method.run(x)[0], first)


def test_two_methods_in_one_file(exported):
    path, model, example, report = exported("two_methods")
    program = kiln.load(path)
    assert sorted(program.method_names) == ["encode", "forward"]
    for method in ("forward", "encode"):
        got, want = run_both(exported, "two_methods", method=method)
        assert_close(got[0], want[0], TOLERANCE)
    # The encoder weight is used by both methods and stored once.
    encoder_bytes = 16 * 8 * 4
    assert report.constant_bytes < 2 * (encoder_bytes + 8 * 4) + (8 * 16 + 16) * 4


def test_tied_weights_are_stored_once(exported):
    path, model, _, report = exported("tied")
    weight_bytes = model.embed.weight.numel() * 4
    assert report.num_segments == 1
    assert weight_bytes <= report.constant_bytes < 2 * weight_bytes
    assert path.stat().st_size < 2 * weight_bytes


def test_memory_plan_reuses_buffers(exported):
    path, _, _, report = exported("cnn_unfused")
    forward = report.methods["forward"]
    # Without reuse the arena would be the naive sum (less the last tensor's
    # alignment padding). This CNN never has more than a few activations live,
    # so real reuse halves it at least (unfused: every batch norm, relu and
    # add has an output of its own).
    assert 0 < forward.arena_bytes < forward.naive_bytes / 2
    assert f"planned {forward.arena_bytes} bytes (naive {forward.naive_bytes})" in str(report)
    # The runtime allocates exactly what the plan says.
    assert sum(kiln.load(path).method("forward").arena_bytes) == forward.arena_bytes


def test_program_reports_specs(exported):
    path, _, example, _ = exported("cnn")
    method = kiln.load(path).method("forward")
    (spec,) = method.input_specs
    assert spec.dtype == "float32" and spec.shape == tuple(example[0].shape)
    assert [s.shape for s in method.output_specs] == [(2, 10)]


def test_load_from_bytes_and_buffer(exported):
    path, _, example, _ = exported("mlp")
    data = path.read_bytes()
    expected = kiln.load(path).forward(example[0].numpy())[0]
    for source in (data, bytearray(data), memoryview(data)):
        got = kiln.load(source).forward(example[0].numpy())[0]
        np.testing.assert_array_equal(got, expected)


def test_loaded_program_owns_a_copy_of_writable_buffers(exported):
    # A writable buffer is copied at load: changing or freeing it afterwards must
    # not affect the program. Many loads, so that every heap alignment occurs.
    path, _, example, _ = exported("mlp")
    data = path.read_bytes()
    x = example[0].numpy()
    expected = kiln.load(path).forward(x)[0]
    programs = []
    for _ in range(64):
        buffer = bytearray(data)
        programs.append(kiln.load(buffer))
        buffer[:] = bytes(len(buffer))  # scribble over the caller's copy
        del buffer
        _ = [bytearray(len(data)) for _ in range(3)]  # reuse the freed memory
    for program in programs:
        np.testing.assert_array_equal(program.forward(x)[0], expected)
