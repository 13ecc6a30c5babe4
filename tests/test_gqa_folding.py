"""fold_kv_head_expansion: Hugging Face's repeat_kv before scaled_dot_product_attention becomes
sdpa(enable_gqa=True) on the unrepeated keys and values (no expand or copy of them left), with the
same results as eager PyTorch, for a static KV cache and for a dynamic sequence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import kiln

from conftest import assert_close


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, kv, s, d = x.shape
    return x[:, :, None].expand(b, kv, groups, s, d).reshape(b, kv * groups, s, d)


class GqaAttention(torch.nn.Module):
    """9 query heads over 3 kv heads of 16, attending over a cache buffer through a position mask."""

    def __init__(self, capacity: int = 24):
        super().__init__()
        torch.manual_seed(0)
        self.q = torch.nn.Linear(32, 9 * 16)
        self.kv = torch.nn.Linear(32, 2 * 3 * 16)
        self.register_buffer("k_cache", torch.zeros(1, 3, capacity, 16))
        self.register_buffer("v_cache", torch.zeros(1, 3, capacity, 16))

    def forward(self, x, pos):
        b, t, _ = x.shape
        q = self.q(x).reshape(b, t, 9, 16).transpose(1, 2)
        k, v = self.kv(x).reshape(b, t, 2, 3, 16).permute(2, 0, 3, 1, 4)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        mask = torch.arange(self.k_cache.shape[2])[None, :] <= pos[:, None]
        y = F.scaled_dot_product_attention(q, repeat_kv(self.k_cache, 3), repeat_kv(self.v_cache, 3), attn_mask=mask)
        return y.transpose(1, 2).reshape(b, t, 9 * 16)


class GqaSelfAttention(torch.nn.Module):
    """The same without a cache: causal attention over the new tokens, T dynamic."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.qkv = torch.nn.Linear(32, (8 + 2 + 2) * 8)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 12, 8).transpose(1, 2).split([8, 2, 2], dim=1)
        y = F.scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4), is_causal=True)
        return y.transpose(1, 2).reshape(b, t, 64)


def test_repeat_kv_folds_into_gqa_attention(tmp_path):
    from kiln.export import export

    model = GqaAttention().eval()
    x, pos = torch.randn(1, 5, 32), torch.arange(5)
    path = tmp_path / "gqa.kiln"
    t = torch.export.Dim("t", max=24)
    report = export(model, (x, pos), path, dynamic_shapes=({1: t}, {0: t}))
    ops = report.methods["forward"].operators
    assert "aten::scaled_dot_product_attention.default" in ops
    assert "aten::expand.default" not in ops, ops
    method = kiln.load(path).load_method("forward")
    # A prefill, then single steps: the cache carries over in both.
    for step in (torch.arange(5), torch.tensor([5]), torch.tensor([6])):
        xs = torch.randn(1, len(step), 32)
        got = method(xs.numpy(), step.numpy())
        with torch.no_grad():
            want = model(xs, step)
        assert_close(got[0] if isinstance(got, (list, tuple)) else got, want.numpy(), 1e-5)


@pytest.mark.parametrize("t", [1, 7, 20])
def test_repeat_kv_folds_with_dynamic_sequence(tmp_path, t):
    from kiln.export import export

    model = GqaSelfAttention().eval()
    path = tmp_path / "gqa_self.kiln"
    seq = torch.export.Dim("seq", max=32)
    report = export(model, (torch.randn(1, 9, 32),), path, dynamic_shapes=({1: seq},))
    assert "aten::expand.default" not in report.methods["forward"].operators
    x = torch.randn(1, t, 32)
    got = kiln.load(path).forward(x.numpy())
    with torch.no_grad():
        want = model(x)
    assert_close(got[0] if isinstance(got, (list, tuple)) else got, want.numpy(), 1e-5)
