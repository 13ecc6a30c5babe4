"""Inputs: numpy, DLPack and buffer objects are accepted; wrong ones raise InvalidInput with details."""

import array

import numpy as np
import pytest
import torch

import kiln

from conftest import assert_close


@pytest.fixture(scope="module")
def mlp(exported):
    path, model, (x,), _ = exported("mlp")
    with torch.no_grad():
        expected = model(x).numpy()
    return kiln.load(path).method("forward"), x, expected


def test_torch_tensor_through_dlpack(mlp):
    method, x, expected = mlp
    np.testing.assert_allclose(method.run(x)[0], expected, rtol=1e-5, atol=1e-5)
    # A tensor that requires grad works too (DLPack needs a detached view).
    np.testing.assert_allclose(method.run(x.clone().requires_grad_())[0], expected, rtol=1e-5, atol=1e-5)


def test_non_contiguous_inputs_are_copied(mlp):
    method, x, expected = mlp
    strided = np.asfortranarray(x.numpy())
    assert not strided.flags.c_contiguous
    np.testing.assert_allclose(method.run(strided)[0], expected, rtol=1e-5, atol=1e-5)
    transposed = x.t().contiguous().t()  # a torch view with column-major strides
    np.testing.assert_allclose(method.run(transposed)[0], expected, rtol=1e-5, atol=1e-5)


def test_buffer_protocol_input(exported):
    path, model, (x,), _ = exported("mlp")
    method = kiln.load(path).method("forward")
    flat = array.array("f", x.numpy().ravel())  # 1-D buffer: shape mismatch must be reported
    with pytest.raises(kiln.InvalidInput, match=r"input 0 .*wrong number of dimensions"):
        method.run(flat)
    view = memoryview(x.numpy())  # a shaped buffer works
    np.testing.assert_allclose(method.run(view)[0], model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_wrong_shape_names_input_and_expectation(mlp):
    method, x, _ = mlp
    with pytest.raises(kiln.InvalidInput) as err:
        method.run(np.zeros((4, 31), dtype=np.float32))
    message = str(err.value)
    assert "input 0" in message and "wrong shape" in message
    assert "expected f32[4, 32]" in message and "got f32[4, 31]" in message


def test_wrong_dtype_names_input_and_expectation(mlp):
    method, _, _ = mlp
    with pytest.raises(kiln.InvalidInput, match=r"input 0 .*wrong dtype: expected f32\[4, 32\], got f64\[4, 32\]"):
        method.run(np.zeros((4, 32), dtype=np.float64))


def test_wrong_input_count(mlp):
    method, x, _ = mlp
    with pytest.raises(kiln.InvalidInput, match="takes 1 inputs"):
        method.run(x, x)
    with pytest.raises(kiln.InvalidInput, match="takes 1 inputs"):
        method.run()


def test_not_an_array(mlp):
    method, _, _ = mlp
    with pytest.raises(kiln.InvalidInput, match="method 'forward': an input is not an array, DLPack or buffer"):
        method.run(object())


def test_unknown_method(exported):
    path, *_ = exported("mlp")
    program = kiln.load(path)
    with pytest.raises(kiln.KilnError, match="no method 'nope'"):
        program.method("nope")
    with pytest.raises(AttributeError, match="kiln.Program has no attribute or method 'nope'"):
        program.nope  # noqa: B018 (the attribute access is what raises)


def test_torch_tensor_with_the_negative_bit(mlp):
    """Defect 4: DLPack drops torch's lazy negation (c.conj().imag is -x with the
    neg bit set): kiln read the positive values."""
    method, x, _ = mlp
    negated = torch.complex(torch.zeros_like(x), x).conj().imag
    assert negated.is_neg()
    (want,) = method.run((-x).contiguous().numpy())
    assert_close(method.run(negated)[0], want, 0.0)
    # A neg-bit tensor that requires grad (detached on the way), and a strided
    # neg-bit view (copied on the way).
    needs_grad = torch.complex(torch.zeros_like(x), x.clone().requires_grad_()).conj().imag
    assert needs_grad.is_neg() and needs_grad.requires_grad
    assert_close(method.run(needs_grad)[0], want, 0.0)
    strided = torch.complex(torch.zeros_like(x.t()), x.t()).conj().imag.t()
    assert strided.is_neg() and not strided.is_contiguous()
    assert_close(method.run(strided)[0], want, 0.0)


def test_inputs_by_name(mlp):
    method, x, expected = mlp
    assert_close(method(x=x.numpy())[0], expected, 1e-5)


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {"y": 1}, r"method 'forward' has no input named 'y' \(its inputs: x\)"),
    ((np.zeros((4, 32), np.float32),), {"x": 1}, "input 'x' is given both by position and by name"),
])
def test_bad_keyword_inputs(mlp, args, kwargs, message):
    """Defect 8: keyword arguments raised a plain TypeError."""
    method, _, _ = mlp
    with pytest.raises(kiln.InvalidInput, match=message):
        method(*args, **kwargs)
