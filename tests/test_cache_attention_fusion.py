"""fuse_cache_attention: the LLM program's attention over index_select(cache, rows).view(...) becomes
kiln::sdpa_rows, which reads the cache rows in place, with exactly the results of the unfused program
(the same kernels' float operations) at both tiers and every ISA level, for batches of 1 and 2 rows,
prefill and decode; patterns it must leave alone stay as they are."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SDPA_ROWS = "kiln::sdpa_rows.default"
INDEX_SELECT = "aten::index_select.default"


def tiny_llama(slots: int = 2, cache_dtype=torch.float32):
    from kiln.llm.model import Llama, LlamaConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, dim=48, n_layers=2, n_heads=6, n_kv_heads=2, hidden_dim=48,
                      rope_theta=10000.0, norm_eps=1e-5, context_length=80, tied_embeddings=True)
    model = Llama(cfg, capacity=80, last_logits_only=True, slots=slots, cache_dtype=cache_dtype).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model


def export(model, path, fuse: bool):
    from kiln.export.passes import fuse_cache_attention
    from kiln.llm.export import export_program

    original = fuse_cache_attention.run
    if not fuse:
        fuse_cache_attention.run = lambda ctx: None
    try:
        return export_program(model, path, max_tokens_per_call=8, context=80, metadata={}).methods["forward"]
    finally:
        fuse_cache_attention.run = original


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cache_attention")
    model = tiny_llama()
    fused, plain = directory / "fused.kiln", directory / "plain.kiln"
    return export(model, fused, True), fused, export(model, plain, False), plain


def test_cache_gathers_fuse_into_sdpa_rows(programs):
    fused, _, plain, _ = programs
    assert SDPA_ROWS in fused.operators and INDEX_SELECT not in fused.operators, fused.operators
    assert "aten::scaled_dot_product_attention.default" not in fused.operators
    assert fused.fused[("cache_gather", "sdpa_rows")] == 2  # one per layer
    assert "2 key/value cache gathers into sdpa_rows" in fused.fused_summary()
    assert SDPA_ROWS not in plain.operators and INDEX_SELECT in plain.operators
    assert fused.num_instructions < plain.num_instructions


def steps():
    """(tokens, input_pos, slots, cache_positions) of a session: both slots prefill 7 and 3 tokens
    (the shorter padded), then decode together, then slot 1 alone, then slot 0 alone."""
    rng = np.random.default_rng(1)
    tok = lambda *s: rng.integers(0, 64, size=s, dtype=np.int64)  # noqa: E731
    yield tok(2, 7), np.array([np.arange(7), np.r_[np.arange(3), [2] * 4]]), np.arange(2), np.arange(7)
    for p in range(7, 12):
        yield tok(2, 1), np.array([[p], [p - 4]]), np.arange(2), np.arange(p + 1)
    for p in range(8, 11):
        yield tok(1, 1), np.array([[p]]), np.array([1]), np.arange(p + 1)
    yield tok(1, 3), np.array([[12, 13, 14]]), np.array([0]), np.arange(15)


@pytest.mark.parametrize("kernels", ["optimized", "portable"])
def test_sdpa_rows_equals_the_unfused_program_exactly(programs, kernels):
    _, fused, _, plain = programs
    isas = kiln.supported_isas() if kernels == "optimized" else [None]
    for isa in isas:
        options = {"kernels": kernels, **({"isa": isa} if isa else {})}
        a = kiln.load(fused, **options).load_method("forward")
        b = kiln.load(plain, **options).load_method("forward")
        tiers = {i.tier for i in a.instructions if i.op == SDPA_ROWS}
        assert tiers == {100 if kernels == "optimized" else 0}, tiers
        for i, args in enumerate(steps()):
            got, want = a(*args)[0], b(*args)[0]
            assert np.isfinite(want).all()
            assert np.array_equal(got, want), f"{kernels} {isa} step {i}: max diff {np.abs(got - want).max()}"


# bfloat16 in the full tier: its kernels' reads are the same code (tests/cpp/kernels/sdpa_test.cpp
# compares both 16-bit formats at every level), only the export and the rounding differ.
@pytest.mark.parametrize("cache_dtype", [torch.float16, pytest.param(torch.bfloat16, marks=pytest.mark.full)],
                         ids=["float16", "bfloat16"])
def test_a_16bit_cache_is_kept_and_read_in_place_like_eager(tmp_path, cache_dtype):
    """kiln llm export --kv-cache-dtype: the caches are state of that dtype (half the bytes), the
    rounding to it is the write's, sdpa_rows reads them without a widened copy, and each step of a
    session gives eager PyTorch's logits with the same 16-bit cache at both tiers and every level."""
    from kiln.llm.model import reset_cache

    model = tiny_llama(cache_dtype=cache_dtype)
    path = tmp_path / "compact.kiln"
    report = export(model, path, True)
    assert SDPA_ROWS in report.operators and INDEX_SELECT not in report.operators, report.operators
    assert "2 key/value cache gathers into sdpa_rows" in report.fused_summary()
    state = kiln.load(path).method("forward").state_specs
    assert len(state) == 4 and all(spec.dtype == str(cache_dtype).removeprefix("torch.") for spec in state), state
    for kernels, isa in [("portable", None)] + [("optimized", isa) for isa in kiln.supported_isas()]:
        method = kiln.load(path, kernels=kernels, **({"isa": isa} if isa else {})).load_method("forward")
        reset_cache(model)
        for i, args in enumerate(steps()):
            with torch.no_grad():
                want = model(*(torch.from_numpy(a) for a in args)).numpy()
            got = method(*args)[0]
            assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max(), \
                f"{kernels} {isa} step {i}: max diff {np.abs(got - want).max()}"


class CacheAttention(torch.nn.Module):
    """The LLM's cache read, with a twist: `other` makes the gather (or its view) read twice."""

    def __init__(self, other: str = "none"):
        super().__init__()
        self.other = other
        self.register_buffer("k_cache", torch.randn(2 * 2 * 16, 8))
        self.register_buffer("v_cache", torch.randn(2 * 2 * 16, 8))

    def forward(self, q, rows):
        b = q.shape[0]
        gathered = self.k_cache.index_select(0, rows)
        keys = gathered.reshape(b, 2, -1, 8)
        values = self.v_cache.index_select(0, rows).reshape(b, 2, -1, 8)
        y = F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
        if self.other == "gather":
            return y, gathered.sum()
        if self.other == "view":
            return y, keys.sum()
        return y


@pytest.mark.parametrize("other", ["none", "gather", "view"])
def test_sdpa_rows_only_where_the_gathers_have_no_other_reader(tmp_path, other):
    from kiln.export import export

    model = CacheAttention(other).eval()
    q = torch.randn(2, 4, 3, 8)
    rows = torch.tensor([(s * 2 + h) * 16 + p for s in (1, 0) for h in range(2) for p in range(5)])
    path = tmp_path / "cache_attention.kiln"
    ops = export(model, (q, rows), path).methods["forward"].operators
    assert (SDPA_ROWS in ops) == (other == "none"), ops
    with torch.no_grad():
        want = model(q, rows)
    want = want[0] if isinstance(want, tuple) else want
    for kernels in ("optimized", "portable"):
        got = kiln.load(path, kernels=kernels).load_method("forward")(q.numpy(), rows.numpy())[0]
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernels", ["optimized", "portable"])
def test_sdpa_rows_refuses_a_row_out_of_range(tmp_path, kernels):
    from kiln.export import export

    model = CacheAttention().eval()
    q = torch.randn(2, 4, 3, 8)
    rows = torch.arange(2 * 2 * 5)
    path = tmp_path / "cache_attention.kiln"
    export(model, (q, rows), path)
    method = kiln.load(path, kernels=kernels).load_method("forward")
    for bad in (64, -1, 2 ** 62):
        hostile = rows.numpy().copy()
        hostile[7] = bad
        with pytest.raises(kiln.KilnError, match="out of bounds"):
            method(q.numpy(), hostile)
    method(q.numpy(), rows.numpy())  # the method still runs
