"""GGUF's Q5_0, Q5_1, Q4_K, Q5_K and Q6_K blocks kept whole, and its F16 and BF16 matrices kept in
16 bits (kiln_quantized's block formats; extensions/quantized/quant.h), each against the `gguf`
package as the independent reference:

  * random blocks decode bit for bit like gguf.quants.dequantize, in numpy (blocks.py, gguf.py)
    and in kiln's kernels (embedding rows and identity linears, both tiers, every ISA level);
  * the linear equals a float64 product of gguf's decoded weights within float32 rounding, and
    every row of an M-row product is the row alone, bit for bit;
  * a SmolLM2 GGUF whose tensors are re-quantized to the five formats (gguf's quantizer for
    Q5_0 / Q5_1; random blocks with sane float16 scales for the K-quants, which gguf cannot
    quantize) exports as it is and decodes like the same file with those tensors in F32;
  * compute="int8" (the input quantized per 32-block): the optimized tier equals the reference
    bit for bit at every level and row count, the eager op agrees, and the result is gguf's
    float64 product up to the rounding of the input to int8;
  * truncated blocks and rows that are not whole blocks are clear, typed errors.
"""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
from llm_files import Blocks, write_gguf

import kiln

from conftest import export_embedding_and_linear

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

Q = gguf.GGMLQuantizationType
FORMATS = [Q.Q5_0, Q.Q5_1, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.F16, Q.BF16]
# ggml type -> (elements, bytes) per block, and the offsets of its float16 fields with their magnitude
_LAYOUT = {Q.Q5_0: (32, 22, {0: 1e-2}), Q.Q5_1: (32, 24, {0: 1e-2, 2: 1e-1}),
           Q.Q4_K: (256, 144, {0: 1e-3, 2: 1e-3}), Q.Q5_K: (256, 176, {0: 1e-3, 2: 1e-3}),
           Q.Q6_K: (256, 210, {208: 1e-4}), Q.F16: (32, 64, {}), Q.BF16: (32, 64, {})}


def random_blocks(rng, ggml_type, rows: int, k: int) -> np.ndarray:
    """uint8 [rows, k / B * bytes]: random bytes, with finite float16 scales (either sign, zero,
    subnormal) where the format has them."""
    elements, nbytes, halves = _LAYOUT[ggml_type]
    count = rows * (k // elements)
    if ggml_type in (Q.F16, Q.BF16):  # finite values of every kind: normal, zero, -0, subnormal, large
        v = (rng.standard_normal((rows, k)) * 0.1).astype(np.float32)
        v.flat[::13] = 0.0
        v.flat[5::17] = -0.0
        v.flat[7::19] = 3e-6 if ggml_type == Q.F16 else 1e-39
        v.flat[9::23] = 6e4 if ggml_type == Q.F16 else 1e30  # sums of them stay finite
        if ggml_type == Q.F16:
            return v.astype(np.float16).view(np.uint8).reshape(rows, -1)
        return (v.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, -1)
    blocks = rng.integers(0, 256, (count, nbytes), dtype=np.uint8)
    for at, scale in halves.items():
        h = (rng.uniform(-1, 1, count) * scale).astype(np.float16)
        h[::7] = 0
        h[3::11] = np.float16(3e-6)  # a float16 subnormal
        blocks[:, at:at + 2] = h.view(np.uint8).reshape(count, 2)
    return blocks.reshape(rows, -1)


def bits(a) -> list:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).tolist()


@pytest.mark.parametrize("ggml_type", FORMATS, ids=lambda t: t.name)
def test_numpy_decoding_is_gguf_bit_for_bit(torch, ggml_type):
    from kiln.export.quantize import from_gguf_blocks

    rng = np.random.default_rng(int(ggml_type))
    shape = (13, 512)
    blocks = random_blocks(rng, ggml_type, *shape)
    want = gguf.quants.dequantize(blocks, ggml_type)
    qw = from_gguf_blocks(blocks, ggml_type, shape)
    assert qw.shape == shape and qw.scales is None and qw.qweight.shape == blocks.shape
    assert bits(qw.dequantize().numpy()) == bits(want)
    if ggml_type in (Q.Q5_0, Q.Q5_1):  # gguf's own quantizer's blocks, of real-looking weights
        w = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        theirs = gguf.quants.quantize(w, ggml_type)
        got = from_gguf_blocks(theirs, ggml_type, shape).dequantize().numpy()
        assert bits(got) == bits(gguf.quants.dequantize(theirs, ggml_type))


@pytest.mark.parametrize("ggml_type", FORMATS, ids=lambda t: t.name)
def test_kernels_decode_gguf_blocks_exactly(torch, tmp_path, ggml_type):
    """Embedding rows, and x = identity rows through the linear (each output one weight), equal
    gguf.quants.dequantize bit for bit on both tiers and every level, at 1, 3 and 64 rows."""
    from kiln.export.quantize import from_gguf_blocks

    shape = (40, 512)
    blocks = random_blocks(np.random.default_rng(7 + int(ggml_type)), ggml_type, *shape)
    want = gguf.quants.dequantize(blocks, ggml_type)
    qw = from_gguf_blocks(blocks, ggml_type, shape)
    idx = np.arange(shape[0])
    for rows in (1, 3, 64):
        path = tmp_path / f"blocks{rows}.kiln"
        export_embedding_and_linear(qw, rows, path)
        x = np.eye(shape[1], dtype=np.float32)[:rows]
        for kernels in ("portable", "optimized"):
            for isa in kiln.supported_isas():
                emb, lin = kiln.load(path, kernels=kernels, isa=isa).forward(idx, x)
                assert bits(emb) == bits(want), (kernels, isa)
                # A sum starting at +0 turns a decoded -0 into +0: equal as numbers.
                assert np.array_equal(lin, want.T[:rows]), (kernels, isa, rows)


@pytest.mark.parametrize("ggml_type", FORMATS, ids=lambda t: t.name)
def test_linear_matches_a_float64_product_and_rows_are_exact(torch, tmp_path, ggml_type):
    """y = x W^T + b against float64 numpy over gguf's decoded W: within 1e-5 of the output scale
    (float32 sums of 768 products); row r of an M-row call is row r alone, bit for bit, up to the
    decode steps' 16 rows (above them the optimized tier's GEMM sums in another order)."""
    from kiln.export import export
    from kiln.export.quantize import QuantizedLinear, from_gguf_blocks

    rng = np.random.default_rng(11 + int(ggml_type))
    n, k, capacity = 70, 768, 24
    blocks = random_blocks(rng, ggml_type, n, k)
    w = gguf.quants.dequantize(blocks, ggml_type).astype(np.float64)
    bias = rng.standard_normal(n).astype(np.float32)
    layer = QuantizedLinear(from_gguf_blocks(blocks, ggml_type, (n, k)), bias=torch.from_numpy(bias))
    path = tmp_path / "linear.kiln"
    rows = torch.export.Dim("rows", max=capacity)
    export(layer, (torch.zeros(4, k),), path, dynamic_shapes=({0: rows},))
    x = rng.standard_normal((capacity, k)).astype(np.float32)
    want = x.astype(np.float64) @ w.T + bias
    scale = np.abs(want).max()
    for kernels in ("portable", "optimized"):
        for isa in kiln.supported_isas():
            fwd = kiln.load(path, kernels=kernels, isa=isa).forward
            (y,) = fwd(x)
            assert np.abs(y - want).max() <= 1e-5 * scale, (kernels, isa)
            alone = np.concatenate([fwd(x[r:r + 1])[0] for r in range(16)])
            assert np.abs(alone - want[:16]).max() <= 1e-5 * scale, (kernels, isa)
            for m in (2, 5, 16):
                (part,) = fwd(x[:m])
                assert bits(part) == bits(alone[:m]), (kernels, isa, m)
            (part,) = fwd(x[:17])
            assert bits(part) == bits(y[:17]), (kernels, isa)


@pytest.mark.parametrize("ggml_type", FORMATS[:5], ids=lambda t: t.name)
def test_int8_compute_is_exact_across_tiers_and_near_the_float_product(torch, tmp_path, ggml_type):
    """compute="int8" on a block format: both tiers, every level, 1 to 40 rows, bit for bit; the
    eager op within float rounding; and |y - x W^T| within sum over 32-blocks of max|x| / 254 *
    sum|w| (each input rounded to int8 moves by at most half its block's step) of gguf's W."""
    from kiln.export import export
    from kiln.export.quantize import QuantizedLinear, from_gguf_blocks

    rng = np.random.default_rng(21 + int(ggml_type))
    n, k, capacity = 37, 512, 40
    blocks = random_blocks(rng, ggml_type, n, k)
    w = gguf.quants.dequantize(blocks, ggml_type).astype(np.float64)
    layer = QuantizedLinear(from_gguf_blocks(blocks, ggml_type, (n, k)), compute="int8")
    path = tmp_path / "int8.kiln"
    export(layer, (torch.zeros(4, k),), path, dynamic_shapes=({0: torch.export.Dim("rows", max=capacity)},))
    x = rng.standard_normal((capacity, k)).astype(np.float32)
    x[3] = 0.0
    (want,) = kiln.load(path, kernels="portable").forward(x)
    for isa in kiln.supported_isas():
        fwd = kiln.load(path, kernels="optimized", isa=isa).forward
        for m in (1, 3, 16, 17, 40):
            (got,) = fwd(x[:m])
            assert bits(got) == bits(want[:m]), (isa, m)
    with torch.no_grad():
        eager = layer(torch.from_numpy(x)).numpy()
    assert np.abs(eager - want).max() <= 1e-5 * np.abs(want).max()
    exact = x.astype(np.float64) @ w.T
    step = np.abs(x.astype(np.float64)).reshape(capacity, k // 32, 32).max(-1) / 254        # [M, blocks]
    bound = step @ np.abs(w).reshape(n, k // 32, 32).sum(-1).T                               # [M, N]
    assert np.all(np.abs(want - exact) <= bound * 1.001 + 1e-5 * np.abs(exact).max())
    assert np.abs(want - exact).max() > 0  # int8 rounding is visible: this is not the float path


def test_truncated_and_misshapen_blocks_are_clear_errors(torch, tmp_path):
    from kiln.export import export
    from kiln.export.quantize import from_gguf_blocks

    blocks = random_blocks(np.random.default_rng(0), Q.Q4_K, 4, 512)
    with pytest.raises(ValueError, match=r"Q4_K tensor of shape \[4, 512\] needs 1152 bytes .* got 1151: truncated"):
        from_gguf_blocks(blocks.reshape(-1)[:-1], Q.Q4_K, (4, 512))
    with pytest.raises(ValueError, match="rows a multiple of 256"):
        from_gguf_blocks(blocks, Q.Q4_K, (8, 288))
    # A program whose q6_k qweight lost a byte per row (the exporter traces shapes only): the
    # kernels of both tiers refuse it by name.
    from kiln.export.quantize import ops

    class Lying(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("q", torch.zeros(4, 209, dtype=torch.uint8))

        def forward(self, x):
            return ops.linear(x, self.q, None, None, None, "q6_k", 256, "float32")

    path = tmp_path / "bad.kiln"
    export(Lying(), (torch.zeros(2, 256),), path)
    for kernels in ("portable", "optimized"):
        with pytest.raises(kiln.KilnError, match=r"qweight .*\[4, 209\].* does not hold whole q6_k blocks \(210 bytes"):
            kiln.load(path, kernels=kernels).forward(np.zeros((2, 256), np.float32))


def test_gguf_tensor_that_is_not_whole_blocks_names_the_tensor(tmp_path):
    """The GGUF reader (libkiln_llm) checks every tensor's rows and bytes against its type's
    blocks when the file is opened: InvalidProgram naming the tensor, its type and the size."""
    from kiln.errors import InvalidProgram
    from kiln.llm.gguf import GgufFile

    blocks = random_blocks(np.random.default_rng(2), Q.Q5_K, 2, 256)
    meta = {"general.architecture": "llama"}
    good = write_gguf(tmp_path / "good.gguf", meta, {"w.weight": Blocks(int(Q.Q5_K), (2, 256), blocks.tobytes())})
    assert bits(GgufFile(good).dequantize("w.weight")) == bits(gguf.quants.dequantize(blocks, Q.Q5_K))
    odd = write_gguf(tmp_path / "odd.gguf", meta, {"odd.weight": Blocks(int(Q.Q5_K), (1, 288), blocks.tobytes())})
    with pytest.raises(InvalidProgram, match=r"tensor 'odd.weight' of type Q5_K has rows of 288, not a multiple of "
                                             r"its 256-element blocks"):
        GgufFile(odd)
    # The file ends inside the last tensor's blocks.
    short = tmp_path / "short.gguf"
    short.write_bytes(good.read_bytes()[:-1])
    with pytest.raises(InvalidProgram, match="w.weight"):
        GgufFile(short)


# --------------------------------------------------------------------------- a mixed SmolLM2 file

LAYERS = 3
# Per layer: the format of each matrix whose rows (576) are whole Q5_x blocks; ffn_down (rows of
# 1536 = 6 x 256) takes a K-quant, one per layer.
_Q5 = {"attn_q": Q.Q5_0, "attn_k": Q.Q5_1, "attn_v": Q.Q5_0, "attn_output": Q.Q5_1, "ffn_gate": Q.Q5_1,
       "ffn_up": Q.Q5_0}
_K = [Q.Q4_K, Q.Q5_K, Q.Q6_K]


@pytest.fixture(scope="module")
def mixed_programs(tmp_path_factory, torch):
    """(mixed program, F32 reference program, export report of the mixed one): SmolLM2's first
    three layers with its Q8_0 embeddings kept, the Q5_x and K-quant tensors above, written once
    as blocks and once as gguf's dequantization of those blocks in F32, both exported by kiln."""
    from kiln.llm.export import export_gguf
    from kiln.llm.gguf import GgufFile

    from zoo import smollm2 as zoo

    src = GgufFile(zoo.gguf_path())
    meta = dict(src.metadata)
    meta["llama.block_count"] = LAYERS
    rng = np.random.default_rng(23)
    mixed, ref = {}, {}
    for name, t in src.tensors.items():
        parts = name.split(".")
        if parts[0] == "blk" and int(parts[1]) >= LAYERS:
            continue
        part = parts[2] if parts[0] == "blk" else None
        if part in _Q5 or part == "ffn_down":
            kind = _Q5[part] if part in _Q5 else _K[int(parts[1])]
            if part in _Q5:
                blocks = gguf.quants.quantize(src.dequantize(name), kind)
            else:
                blocks = random_blocks(rng, kind, *t.shape)
            mixed[name] = Blocks(int(kind), t.shape, blocks.tobytes())
            ref[name] = gguf.quants.dequantize(blocks, kind).reshape(t.shape)
        else:
            mixed[name] = ref[name] = Blocks(t.ggml_type, t.shape, src.raw(name).tobytes())
    folder = tmp_path_factory.mktemp("mixed")
    out = {}
    for label, tensors in (("mixed", mixed), ("ref", ref)):
        gguf_path = write_gguf(folder / f"{label}.gguf", meta, tensors)
        out[label] = folder / f"{label}.kiln"
        out[label + "_report"] = export_gguf(gguf_path, out[label], context=64, max_tokens_per_call=16,
                                             compute="float32")
        if label == "mixed":  # the default export: the same blocks, int8 activations
            out["int8"] = folder / "mixed-int8.kiln"
            out["int8_report"] = export_gguf(gguf_path, out["int8"], context=64, max_tokens_per_call=16)
    return out


def test_mixed_gguf_exports_as_it_is_and_decodes_like_its_f32_twin(mixed_programs):
    from kiln.llm import Runner

    from zoo import smollm2 as zoo

    mixed, ref, report = mixed_programs["mixed"], mixed_programs["ref"], mixed_programs["mixed_report"]
    assert report.weights == "gguf Q4_K/Q5_0/Q5_1/Q5_K/Q6_K/Q8_0", report.weights
    config = json.loads(kiln.load(mixed).metadata("kiln.llm.config"))
    assert config["weights"] == report.weights
    text = str(report)
    for scheme, count in (("q5_0", 9), ("q5_1", 9), ("q4_k", 1), ("q5_k", 1), ("q6_k", 1)):
        assert f"{count} x linear {scheme}/" in text, text
    ids = zoo.load_tokenizer().encode("The capital of France is")
    args = (np.array([ids]), np.array([np.arange(len(ids))]), np.array([0]), np.arange(len(ids)))
    (want,) = kiln.load(ref).method("forward")(*args)
    for kernels in ("optimized", "portable"):
        (got,) = kiln.load(mixed, kernels=kernels).method("forward")(*args)
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), kernels
    tokens = []
    for path in (mixed, ref):
        runner = Runner(path)
        runner.generate(ids, max_new_tokens=12, temperature=0, ignore_eos=True)
        tokens.append(runner.generated_tokens)
    assert tokens[0] == tokens[1] and len(tokens[0]) == 12, tokens


def test_mixed_gguf_with_int8_compute(mixed_programs):
    """kiln llm export's default, --compute int8: every integer linear of the file's blocks quantizes
    its input (the report and config say so), the logits stay near the float path's (--compute
    float32), and bad combinations are clear errors."""
    from kiln.llm.export import export_gguf

    from zoo import smollm2 as zoo

    report = mixed_programs["int8_report"]
    assert report.weights == "gguf Q4_K/Q5_0/Q5_1/Q5_K/Q6_K/Q8_0, int8 activations", report.weights
    text = str(report)
    for scheme, count in (("q5_0", 9), ("q5_1", 9), ("q4_k", 1), ("q5_k", 1), ("q6_k", 1)):
        assert f"{count} x linear {scheme}/{256 if scheme[-1] == 'k' else 32} int8:" in text, text
    assert "1 x linear q8_0/32 int8:" in text, text  # the tied head over the Q8_0 embedding
    ids = zoo.load_tokenizer().encode("The capital of France is")
    args = (np.array([ids]), np.array([np.arange(len(ids))]), np.array([0]), np.arange(len(ids)))
    (want,) = kiln.load(mixed_programs["mixed"]).method("forward")(*args)
    (got,) = kiln.load(mixed_programs["int8"]).method("forward")(*args)
    assert 0 < np.abs(got - want).max() <= 0.05 * np.abs(want).max()
    for options, match in (({"compute": "int4"}, "compute 'int4' is not supported"),
                           ({"compute": "int8", "dtype": "float32"}, "applies to the GGUF's own blocks")):
        with pytest.raises(kiln.errors.ExportError, match=match):
            export_gguf(zoo.gguf_path(), mixed_programs["int8"].with_name("never.kiln"), **options)


def test_inspect_lists_the_block_formats(mixed_programs):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "kiln", "inspect", str(mixed_programs["mixed"])],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for line in ("1 x linear q4_k/256: 1 weights", "1 x linear q6_k/256: 1 weights", "9 x linear q5_0/32: 9 weights"):
        assert line in proc.stdout, proc.stdout


@pytest.mark.parametrize("embedding", [Q.Q6_K, Q.F16], ids=lambda t: t.name)
def test_every_matrix_in_a_block_format_tied_embedding_included(tmp_path, embedding):
    """A small random Llama whose embedding (also its tied output head) is Q6_K or F16 and whose
    other matrices cycle through the seven formats: exported as it is (float32 activations), it
    gives the logits of the same file with those tensors in F32 (gguf's decoding), on both tiers."""
    from llm_files import tiny_llama

    from kiln.llm.export import export_gguf

    meta, tensors = tiny_llama(dim=256, n_heads=2, n_kv_heads=1, hidden=512, n_layers=2)
    rng = np.random.default_rng(31)
    mixed, ref, kinds = {}, {}, iter(FORMATS * 4)
    for name, w in tensors.items():
        if w.ndim == 2:
            kind = embedding if name == "token_embd.weight" else next(kinds)
            blocks = random_blocks(rng, kind, *w.shape)
            mixed[name] = Blocks(int(kind), w.shape, blocks.tobytes())
            ref[name] = gguf.quants.dequantize(blocks, kind).reshape(w.shape)
        else:
            mixed[name] = ref[name] = w
    logits = {}
    for label, t in (("mixed", mixed), ("ref", ref)):
        report = export_gguf(write_gguf(tmp_path / f"{label}.gguf", meta, t), tmp_path / f"{label}.kiln",
                             context=16, max_tokens_per_call=8, compute="float32")
        if label == "mixed":
            assert report.weights == "gguf BF16/F16/Q4_K/Q5_0/Q5_1/Q5_K/Q6_K", report.weights
            scheme = embedding.name.lower()
            assert f"1 x embedding {scheme}/{256 if embedding == Q.Q6_K else 32}: 1 weights" in str(report), \
                str(report)
        ids = np.array([[0, 2, 1, 1, 0]])
        args = (ids, np.arange(5)[None], np.array([0]), np.arange(5))
        for kernels in ("optimized", "portable"):
            (logits[label, kernels],) = kiln.load(tmp_path / f"{label}.kiln", kernels=kernels).method("forward")(*args)
    want = logits["ref", "optimized"]
    for kernels in ("optimized", "portable"):
        assert np.abs(logits["mixed", kernels] - want).max() <= 1e-4 * np.abs(want).max(), kernels
