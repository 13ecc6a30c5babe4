"""fuse_attention: attention written as softmax(q @ k^T / c + mask) @ v (BERT, MiniLM) becomes one
scaled_dot_product_attention, with the same results as eager PyTorch at every sequence length, with
the fast and the reference kernels; patterns it must leave alone stay as they are (and still run)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import kiln

from conftest import assert_close

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SDPA = "aten::scaled_dot_product_attention.default"
SOFTMAX = "aten::_softmax.default"
TOLERANCE = 1e-5


class BertAttention(torch.nn.Module):
    """BERT's self-attention: 4 heads of 8, a padding mask of -10000 from an int attention mask."""

    def __init__(self, scale: str = "div", mask: str = "padding"):
        super().__init__()
        torch.manual_seed(0)
        self.qkv = torch.nn.Linear(32, 3 * 32)
        self.scale, self.mask = scale, mask

    def forward(self, x, attention_mask):
        b, t, _ = x.shape
        q, k, v = (y.reshape(b, t, 4, 8).transpose(1, 2) for y in self.qkv(x).split(32, dim=-1))
        scores = torch.matmul(q, k.transpose(-1, -2))
        if self.scale == "div":
            scores = scores / math.sqrt(8)
        elif self.scale == "mul":
            scores = scores * 0.3
        if self.mask == "padding":
            scores = scores + (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        elif self.mask == "padding_first":
            scores = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0 + scores
        elif self.mask == "float_input":  # the caller's floats: could hide a whole row with -inf
            scores = scores + attention_mask[:, None, None, :]
        elif self.mask == "neg_inf_causal":
            causal = torch.full((t, t), float("-inf")).triu(1)
            scores = scores + causal
        probs = torch.softmax(scores, dim=-1)
        return torch.matmul(probs, v).transpose(1, 2).reshape(b, t, 32)


def export(tmp_path, model, mask_dtype=torch.int64, **kwargs):
    from kiln.export import export as kiln_export

    path = tmp_path / "attention.kiln"
    seq = torch.export.Dim("seq", max=40)
    x, mask = torch.randn(1, 6, 32), torch.ones(1, 6, dtype=mask_dtype)
    report = kiln_export(model.eval(), (x, mask), path, dynamic_shapes=({1: seq}, {1: seq}), **kwargs)
    return path, report.methods["forward"]


def run_both_tiers(path, model, t, mask, tolerance=TOLERANCE, per_element=True):
    """per_element=False where eager itself is only right to `tolerance` of the output's scale
    (its float32 scores beside -10000): every element is held to that absolute bound alone."""
    x = torch.randn(1, t, 32)
    with torch.no_grad():
        want = model(x, mask).numpy()
    atol = None if per_element else tolerance * float(np.abs(want).max())
    for kernels in ("optimized", "portable"):
        got = kiln.load(path, kernels=kernels).load_method("forward")(x.numpy(), mask.numpy())[0]
        assert_close(got, want, tolerance, f"{kernels} kernels, {t} tokens", atol=atol)


@pytest.mark.parametrize("scale,mask", [("div", "padding"), ("div", "padding_first"), ("mul", "none"),
                                        ("none", "none")])
def test_attention_fuses_and_matches_eager(tmp_path, scale, mask):
    model = BertAttention(scale, mask)
    path, report = export(tmp_path, model)
    assert SDPA in report.operators and SOFTMAX not in report.operators, report.operators
    assert "aten::matmul.default" not in report.operators, report.operators
    assert report.fused == {("attention", "scaled_dot_product_attention"): 1}
    for t in (1, 5, 17, 40):
        ids = torch.ones(1, t, dtype=torch.int64)
        ids[0, t // 2:] = 0  # padding: half of the keys hidden
        ids[0, 0] = 1
        run_both_tiers(path, model, t, ids)


def test_minilm_like_padding_never_hides_a_whole_row(tmp_path):
    """All keys padded: -10000 on every score is still finite, so softmax and sdpa agree, up to
    the precision that eager's float32 scores keep beside -10000 (about 1e-3; the reference
    kernel adds the mask in float64)."""
    model = BertAttention("div", "padding")
    path, _ = export(tmp_path, model)
    run_both_tiers(path, model, 7, torch.zeros(1, 7, dtype=torch.int64), tolerance=1e-3, per_element=False)


@pytest.mark.parametrize("mask", ["float_input", "neg_inf_causal"])
def test_masks_that_may_hide_a_whole_row_are_not_fused(tmp_path, mask):
    """softmax of a row of -inf is NaN, sdpa's zeros: such masks keep the model's operators."""
    model = BertAttention("div", mask)
    path, report = export(tmp_path, model, mask_dtype=torch.float32)
    assert SDPA not in report.operators and SOFTMAX in report.operators, report.operators
    m = torch.zeros(1, 9)
    m[0, 3] = float("-inf")
    run_both_tiers(path, model, 9, m)


def test_optimize_false_keeps_matmul_and_softmax(tmp_path):
    model = BertAttention("div", "padding")
    path, report = export(tmp_path, model, optimize=False)
    assert SDPA not in report.operators and SOFTMAX in report.operators, report.operators
    run_both_tiers(path, model, 9, torch.ones(1, 9, dtype=torch.int64))


class ScoresAlsoReturned(torch.nn.Module):
    """The scores have a second reader (an output): fusing would have to keep them anyway."""

    def forward(self, q, k):
        scores = torch.matmul(q, k.transpose(-1, -2)) / 4.0
        return torch.matmul(torch.softmax(scores, dim=-1), k), scores


class SoftmaxOverQueries(torch.nn.Module):
    def forward(self, q, k):
        return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-2), k)


@pytest.mark.parametrize("model", [ScoresAlsoReturned(), SoftmaxOverQueries()], ids=lambda m: type(m).__name__)
def test_patterns_that_must_not_fuse(tmp_path, model):
    from kiln.export import export as kiln_export

    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    path = tmp_path / "nofuse.kiln"
    report = kiln_export(model, (q, k), path)
    assert SDPA not in report.methods["forward"].operators
    got = kiln.load(path).forward(q.numpy(), k.numpy())
    with torch.no_grad():
        want = model(q, k)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert_close(g, w.numpy(), TOLERANCE)
