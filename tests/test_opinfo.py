"""A fast subset of the OpInfo conformance sweep (scripts/opinfo_sweep.py, docs/opinfo.md).

PyTorch's own samples of ~60 operators spread over the families (elementwise, reductions,
shape, indexing, pooling and convolution, norms), each exported with kiln and compared
with eager PyTorch, float32 within 1e-4 of the output's scale (the sweep's TOLERANCES
widen it per operator, with the reason) and integer/bool results exactly. Every sample
must be ok, except those listed in EXCLUSIONS with their reason; an excluded sample must
still fail the way the table says (so a fix, or a new kind of failure, is noticed), and
no sample may ever be "wrong".
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import REPO

MAX_SAMPLES = 4  # per operator, the first samples PyTorch makes (seeded from the operator's name)

SUBSET = [
    # elementwise
    "add", "sub", "mul", "div.no_rounding_mode", "abs", "neg", "exp", "sqrt", "rsqrt", "sigmoid", "tanh",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.leaky_relu",
    "nn.functional.elu", "clamp", "where", "maximum", "isclose",
    # reductions
    "sum", "mean", "amax", "argmax", "softmax", "log_softmax", "var", "logsumexp", "masked.logsumexp", "cumsum",
    # shape
    "cat", "reshape", "permute", "transpose", "flip", "roll", "tril",
    # factories (linspace decomposes into arange and arithmetic)
    "linspace", "linspace.tensor_overload",
    # indexing
    "index_select", "gather", "index_fill", "index_add", "scatter", "scatter_add", "scatter_reduce.mean",
    "scatter_reduce.amax",
    # pooling, convolution, resampling, linear algebra
    "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.interpolate.nearest",
    "nn.functional.conv1d", "nn.functional.avg_pool1d", "nn.functional.adaptive_avg_pool1d",
    "nn.functional.max_pool1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose1d",
    "nn.functional.grid_sample", "grid_sampler_2d",
    "nn.functional.max_pool3d", "nn.functional.avg_pool3d", "nn.functional.adaptive_avg_pool3d",
    "nn.functional.conv3d",
    "nn.functional.pad.constant", "nn.functional.linear", "bmm",
    # norms
    "nn.functional.layer_norm", "nn.functional.group_norm",
]

# (operator, sample index) -> (the status the sample has today, why it is not ok)
EXCLUSIONS = {
    ("gather", 3): ("run_error", "an empty uint8 index, which eager accepts only because it is empty; "
                                 "kiln's gather takes int64/int32 indices and says so"),
}


def _sweep():
    spec = importlib.util.spec_from_file_location("opinfo_sweep", REPO / "scripts" / "opinfo_sweep.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["opinfo_sweep"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sweep():
    return _sweep()


@pytest.fixture(scope="module")
def ops(sweep):
    return {sweep.operator_name(op): op for op in sweep.load_op_db()}


@pytest.mark.parametrize("name", SUBSET)
def test_opinfo_samples_match_eager(sweep, ops, name, tmp_path):
    op = ops[name]
    results = []
    for k, (sample, too_big) in enumerate(sweep.samples_of(op, "float32", MAX_SAMPLES, 1_000_000)):
        assert not too_big, f"sample {k} is too large for the fast subset: {too_big}"
        result = sweep.run_sample(op, sample, str(tmp_path))
        results.append((k, sweep.describe(sample), result))
    assert results, f"{name}: no float32 samples"
    problems = []
    for k, desc, result in results:
        assert result["status"] != "wrong", f"{name} sample {k} ({desc}) is WRONG: {result['detail']}"
        excluded = EXCLUSIONS.get((name, k))
        if excluded:
            if result["status"] != excluded[0]:
                problems.append(f"sample {k} ({desc}): {result['status']}, but EXCLUSIONS says "
                                f"{excluded[0]} ({excluded[1]}): update the table")
        elif result["status"] != "ok":
            problems.append(f"sample {k} ({desc}): {result['status']}: {result.get('detail')}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_exclusions_name_subset_operators():
    assert all(name in SUBSET for name, _ in EXCLUSIONS), "EXCLUSIONS names an operator outside SUBSET"
