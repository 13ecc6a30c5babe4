"""A program whose operator has no kernel for its dtypes fails at method load, naming both."""

import pytest

import kiln


def test_missing_dtype_fails_at_method_load(exported):
    path, *_ = exported("mlp_f64")
    program = kiln.load(path)  # loading the file is fine: kernels are resolved per method
    with pytest.raises(kiln.MissingKernel) as err:
        program.method("forward")
    message = str(err.value)
    assert "aten::linear.default" in message
    assert "(f64,f64,f64)" in message
    assert "registered dtypes: (f32,f32)" in message  # what would have worked
