"""Weight-only quantization (libkiln_quantized.so.0, kiln.export.quantize; docs/quantization.md).

  * GGUF's Q4_0 / Q4_1 / Q8_0 blocks go in bit for bit: decoded by Python and by kiln's kernels
    (both tiers, every ISA level) exactly as gguf.quants.dequantize decodes them; our quantizer
    writes the same bytes as gguf's for group 32;
  * exported quantized models equal the eager quantized model (every scheme and group size, both
    tiers), and SmolLM2's accuracy under int8 / int4 is measured (perplexity and logit error);
    its GGUF-blocks program decodes greedily like the float32 model built from the same weights;
  * malformed blocks are clear errors, in Python and in a program.

One registry for the quantized kernels, in the shared runtime: test_quantized_registry.py.
"""

from __future__ import annotations

import math
import subprocess
import sys

import gguf  # the test extra: without it these tests fail, as without any test dependency
import numpy as np
import pytest

import kiln

from conftest import STATIC_RUNTIME, clean_env, export_embedding_and_linear, full_tier

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

Q = gguf.GGMLQuantizationType


def _levels():
    """The ISA levels this CPU runs, lowest first (the runtime's list)."""
    return kiln.supported_isas()


def _blocks(rng, ggml_type, shape):
    w = (rng.standard_normal(shape) * 0.05).astype(np.float32)
    w[0, :32] = 0.0  # an all-zero block: scale 0
    return gguf.quants.quantize(w, ggml_type)


# --------------------------------------------------------------------------- GGUF blocks


@pytest.mark.parametrize("ggml_type", [Q.Q4_0, Q.Q4_1, Q.Q8_0])
def test_gguf_blocks_decode_bit_exact(torch, ggml_type):
    from kiln.export.quantize import from_gguf_blocks, quantize_weight

    rng = np.random.default_rng(int(ggml_type))
    shape = (37, 96)
    blocks = _blocks(rng, ggml_type, shape)
    qw = from_gguf_blocks(blocks, ggml_type, shape)
    want = gguf.quants.dequantize(blocks, ggml_type)
    got = qw.dequantize().numpy()
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    # Our quantizer writes gguf's bytes (ggml's reference rounding) for group 32.
    w = (rng.standard_normal(shape) * 0.05).astype(np.float32)
    ours = quantize_weight(torch.from_numpy(w), qw.scheme, 32)
    theirs = from_gguf_blocks(gguf.quants.quantize(w, ggml_type), ggml_type, shape)
    for a, b in ((ours.qweight, theirs.qweight), (ours.scales, theirs.scales), (ours.mins, theirs.mins)):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.equal(a.view(torch.uint8) if a.dtype != torch.float16 else a.view(torch.int16),
                               b.view(torch.uint8) if b.dtype != torch.float16 else b.view(torch.int16))


def test_smollm2_gguf_tensors_decode_bit_exact(torch):
    """The real file's Q4_1 and Q8_0 tensors (a few of them), decoded by from_gguf_blocks."""
    from kiln.export.quantize import from_gguf_blocks

    from zoo import smollm2 as zoo

    reader = gguf.GGUFReader(zoo.gguf_path())
    seen = set()
    for t in reader.tensors:
        kind = Q(int(t.tensor_type))
        if kind not in (Q.Q4_1, Q.Q8_0) or (kind in seen and not t.name.startswith("blk.29")):
            continue
        seen.add(kind)
        shape = tuple(int(n) for n in reversed(t.shape))
        got = from_gguf_blocks(t.data, t.tensor_type, shape).dequantize().numpy()
        want = gguf.quants.dequantize(t.data, t.tensor_type)
        assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist(), t.name
    assert seen == {Q.Q4_1, Q.Q8_0}


def test_bad_gguf_blocks_are_clear_errors():
    from kiln.export.quantize import from_gguf_blocks

    blocks = _blocks(np.random.default_rng(0), Q.Q4_1, (4, 64))
    with pytest.raises(ValueError, match=r"needs 160 bytes of blocks .* got 150: truncated or malformed"):
        from_gguf_blocks(blocks.reshape(-1)[:150], Q.Q4_1, (4, 64))
    with pytest.raises(ValueError, match="Q2_K is not supported"):
        from_gguf_blocks(blocks, Q.Q2_K, (4, 256))
    with pytest.raises(ValueError, match="rows a multiple of 32"):
        from_gguf_blocks(blocks, Q.Q4_1, (8, 40))


@pytest.mark.parametrize("ggml_type", [Q.Q4_0, Q.Q4_1, Q.Q8_0])
def test_kiln_kernels_decode_gguf_blocks_exactly(torch, tmp_path, ggml_type):
    """Embedding rows, and x = identity through the linear (each output one weight), equal
    gguf.quants.dequantize bit for bit on both tiers and every level."""
    from kiln.export.quantize import from_gguf_blocks

    shape = (40, 64)
    blocks = _blocks(np.random.default_rng(7), ggml_type, shape)
    want = gguf.quants.dequantize(blocks, ggml_type)
    qw = from_gguf_blocks(blocks, ggml_type, shape)

    path = tmp_path / "blocks.kiln"
    idx = torch.arange(40)
    for rows in (1, 3, 64):  # decode steps and the GEMM's decoded panels
        x = torch.eye(64)[:rows]
        export_embedding_and_linear(qw, rows, path)
        for kernels in ("portable", "optimized"):
            for isa in _levels():
                emb, lin = kiln.load(path, kernels=kernels, isa=isa).forward(idx.numpy(), x.numpy())
                assert emb.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (kernels, isa)
                # A sum starting at +0 turns a decoded -0 into +0: equal as numbers.
                assert np.array_equal(lin, want.T[:rows]), (kernels, isa, rows)


def test_malformed_block_tensor_in_a_program_is_a_clear_error(torch, tmp_path):
    from kiln.export import export
    from kiln.export.quantize import QuantizedLinear, quantize_weight

    layer = QuantizedLinear(quantize_weight(torch.randn(40, 64), "q4_1", 32))
    layer.scales = torch.zeros(40, 1, dtype=torch.float16)  # one group per row, rows have two
    path = tmp_path / "bad.kiln"
    export(layer, (torch.randn(2, 64),), path)
    for kernels in ("portable", "optimized"):
        with pytest.raises(kiln.KilnError, match=r"scales must be \[40, 2\]"):
            kiln.load(path, kernels=kernels).forward(np.zeros((2, 64), np.float32))


def test_batched_rows_are_bit_identical_to_the_row_alone(torch, tmp_path):
    """A batched decoder runs each linear with one row per sequence: row r of an M-row call must
    be bit for bit what row r gives alone (docs/kernels.md, "Row-exact products"), so that greedy
    decoding in a batch gives every sequence its own tokens. Quantized linears (q4_0, q4_1, q8_0)
    up to the decode steps' 16 rows, the float32 linear at any M; both tiers, every level."""
    from kiln.export import export
    from kiln.export.quantize import QuantizedLinear, quantize_weight

    n, k, capacity = 300, 576, 64

    class Layers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(3)
            self.q = torch.nn.ModuleList(
                QuantizedLinear(quantize_weight(torch.randn(n, k) * 0.05, scheme, 32), bias=torch.randn(n))
                for scheme in ("q4_0", "q4_1", "q8_0"))
            self.f = torch.nn.Linear(k, n)

        def forward(self, x):
            return tuple(layer(x) for layer in self.q) + (self.f(x),)

    path = tmp_path / "rows.kiln"
    rows = torch.export.Dim("rows", max=capacity)
    export(Layers().eval(), (torch.randn(4, k),), path, dynamic_shapes=({0: rows},))
    x = np.random.default_rng(5).standard_normal((capacity, k)).astype(np.float32)
    for kernels in ("portable", "optimized"):
        for isa in _levels():
            fwd = kiln.load(path, kernels=kernels, isa=isa).forward
            alone = [fwd(x[r:r + 1]) for r in range(capacity)]
            for m in list(range(2, 21)) + [33, 64]:
                outs = fwd(x[:m])
                for i, out in enumerate(outs):
                    if i < 3 and kernels == "optimized" and m > 16:
                        continue  # a quantized prefill runs the f32 GEMM on decoded weights
                    want = np.concatenate([a[i] for a in alone[:m]])
                    assert out.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (kernels, isa, m, i)


# --------------------------------------------------------------------------- export(quantize=...)


class _Small:
    @staticmethod
    def make(torch):
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(100, 128)
                self.l1 = torch.nn.Linear(128, 256)
                self.norm = torch.nn.LayerNorm(256)
                self.l2 = torch.nn.Linear(256, 128, bias=False)
                self.head = torch.nn.Linear(128, 100, bias=False)
                self.head.weight = self.emb.weight  # tied

            def forward(self, idx):
                return self.head(self.l2(self.norm(torch.relu(self.l1(self.emb(idx))))))

        torch.manual_seed(0)
        return Model().eval()


@pytest.mark.parametrize("options", ["int8", "int4", "int4_sym", {"scheme": "int4", "group_size": 64},
                                     {"scheme": "int4_sym", "group_size": 128}, {"scheme": "int8", "group_size": 32},
                                     {"scheme": "int4", "embeddings": "int4"}, "int8_dynamic"])
def test_export_quantize_matches_eager_quantized_model(torch, tmp_path, options):
    from kiln.export import export
    from kiln.export.quantize import quantize

    model = _Small.make(torch)
    idx = torch.randint(0, 100, (1, 9))
    path = tmp_path / "q.kiln"
    report = export(model, (idx,), path, quantize=options)
    opts = {"scheme": options} if isinstance(options, str) else options
    quantized = quantize(model, **opts)
    with torch.no_grad():
        want = quantized(idx).numpy()
        ref = model(idx).numpy()
    assert "quantized:" in str(report) and "instead of" in str(report), str(report)
    summary = report.methods["forward"].quantized
    assert summary.quantized_bytes < summary.float_bytes / 3
    for kernels in ("optimized", "portable"):
        (got,) = kiln.load(path, kernels=kernels).forward(idx.numpy())
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= 1e-5 * scale, (kernels, np.abs(got - want).max())
    # Quantized, not float: the error against the float model is that of the scheme.
    assert 0 < np.abs(want - ref).max() < 0.2 * np.abs(ref).max()
    # The caller's model is untouched; the tied head shares the embedding's tensors.
    assert isinstance(model.l1, torch.nn.Linear)
    assert quantized.head.qweight is quantized.emb.qweight


def test_quantize_options_and_inspect(torch, tmp_path):
    from kiln.errors import ExportError
    from kiln.export import export

    model = _Small.make(torch)
    idx = torch.randint(0, 100, (1, 5))
    with pytest.raises(ExportError, match="unknown quantization scheme 'int3'"):
        export(model, (idx,), tmp_path / "x.kiln", quantize="int3")
    path = tmp_path / "q.kiln"
    export(model, (idx,), path, quantize={"scheme": "int4", "group_size": 32})
    out = subprocess.run([sys.executable, "-m", "kiln", "inspect", str(path)], capture_output=True, text=True,
                         env=clean_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "quantized weights:" in out.stdout
    assert "linear q4_1/32: 2 weights" in out.stdout, out.stdout
    assert "embedding q8_0/128: 1 weights" in out.stdout, out.stdout
    # The kernel's library is named when it is not the runtime's own: in a static build the
    # quantized kernels are part of the Python module, which is the runtime.
    library = "" if STATIC_RUNTIME else " (libkiln_quantized.so.0)"
    assert f"kiln_quantized::linear.default: optimized{library}," in out.stdout, out.stdout


# --------------------------------------------------------------------------- SmolLM2

CAPACITY = 256
TEXT = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
        "combined movable metal type, oil-based ink and a wooden press adapted from wine making. "
        "Books became cheaper and faster to produce, literacy spread across Europe, and new ideas "
        "travelled further than ever before. Scientists could share their results, and the "
        "Reformation owed much of its reach to pamphlets printed by the thousand. Within fifty years "
        "presses were running in more than two hundred cities, and millions of volumes had been printed.")


def _perplexity(logits, ids):
    z = logits[0, :-1].astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    nll = -logp[np.arange(len(ids) - 1), ids[1:]]
    return float(math.exp(nll.mean()))


SCHEMES = {"float32": None, "int8": "int8", "int4": "int4", "int4_sym_g64": {"scheme": "int4_sym", "group_size": 64},
           "gguf": "the GGUF's own blocks"}


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    """(float32 eager model, TEXT's ids, its eager logits, program(scheme) -> path): each program is
    exported once, when a test first asks for it (a whole-model export takes tens of seconds)."""
    import torch

    from kiln.export import export

    from zoo import smollm2 as zoo
    from zoo import smollm2_gguf

    model = smollm2_gguf.load_smollm2_float(capacity=CAPACITY)  # quantize() can replace its head
    ids = zoo.load_tokenizer().encode(TEXT)
    tokens = torch.export.Dim("tokens", max=CAPACITY)
    example = (torch.zeros(1, 4, dtype=torch.int64), torch.arange(4))
    dims = ({1: tokens}, {0: tokens})
    folder = tmp_path_factory.mktemp("smol_quantized")
    with torch.no_grad():
        ref = model(torch.tensor([ids]), torch.arange(len(ids))).numpy()
    zoo.reset_cache(model)
    paths = {}

    def program(name: str):
        if name not in paths:
            path = folder / f"{name}.kiln"
            if name == "gguf":
                export(smollm2_gguf.load_smollm2_gguf(capacity=CAPACITY), example, path, dynamic_shapes=dims)
            else:
                export(model, example, path, dynamic_shapes=dims, quantize=SCHEMES[name])
                zoo.reset_cache(model)
            paths[name] = path
        return paths[name]

    return model, ids, ref, program


@pytest.mark.full
def test_smollm2_quantized_accuracy(smol):
    """Perplexity on TEXT and the largest logit error against the float32 eager model (whose
    weights are the GGUF's, dequantized). The numbers are in docs/quantization.md."""
    _, ids, ref, program = smol
    ppl_ref = _perplexity(ref, ids)
    scale = np.abs(ref).max()
    results = {}
    for name in SCHEMES:
        (logits,) = kiln.load(program(name)).method("forward")(np.array([ids]), np.arange(len(ids)))
        err = np.abs(logits - ref)
        results[name] = (_perplexity(logits, ids), float(err.max() / scale), float(np.sqrt((err ** 2).mean())))
    print(f"\nSmolLM2-135M, {len(ids)} tokens: eager float32 perplexity {ppl_ref:.3f}")
    for name, (ppl, max_err, rms) in results.items():
        print(f"  {name:>12}: perplexity {ppl:.3f} ({ppl / ppl_ref - 1:+.2%}), max logit error {max_err:.2e} of the "
              f"logit scale, rms {rms:.3f}")
    # The GGUF's own bits and the float32 program are the reference weights: rounding only.
    assert results["float32"][1] < 1e-4 and results["gguf"][1] < 1e-4, results
    assert abs(results["int8"][0] / ppl_ref - 1) < 0.01, results
    assert abs(results["int4"][0] / ppl_ref - 1) < 0.10, results
    # Symmetric 4 bits in groups of 64 over weights that are already Q4_1: measured +23%.
    assert abs(results["int4_sym_g64"][0] / ppl_ref - 1) < 0.35, results


def test_smollm2_gguf_program_decodes_like_float32_eager(request, torch, smol):
    """Greedy decoding of 32 tokens: the program with the GGUF's Q4_1/Q8_0 blocks gives the token
    ids of the float32 eager model built from the same (dequantized) weights, with the optimized
    kernels (and in the full tier with the portable ones too, whose 32 steps take a minute)."""
    from zoo import smollm2 as zoo

    model, _, _, program = smol
    prompt = zoo.load_tokenizer().chat_prompt("What is the capital of France?")
    zoo.reset_cache(model)
    want = zoo.greedy_generate(model, prompt, 32)
    zoo.reset_cache(model)
    for kernels in ("optimized", "portable") if full_tier(request.config) else ("optimized",):
        method = kiln.load(program("gguf"), kernels=kernels).method("forward")
        (logits,) = method(np.array([prompt]), np.arange(len(prompt)))
        got, pos = [], len(prompt)
        while len(got) < len(want):
            got.append(int(logits[0, -1].argmax()))
            (logits,) = method(np.array([[got[-1]]]), np.array([pos]))
            pos += 1
        assert got == want, kernels


# --------------------------------------------------------------------------- compute="int8"


def _optimized_equals_portable_at_every_level(path, x, row_counts):
    """Every quantized linear of the program at `path` is served by the optimized tier at every level,
    and its outputs for the first m rows of x equal the portable tier's bit for bit; returns the
    portable program's forward."""
    portable = kiln.load(path, kernels="portable").forward
    optimized_tier = kiln.kernel_tiers()["optimized"]
    for isa in _levels():
        prog = kiln.load(path, kernels="optimized", isa=isa)
        tiers = {i.tier for i in prog.method("forward").instructions if i.op == "kiln_quantized::linear.default"}
        assert tiers == {optimized_tier}, (isa, tiers)
        for m in row_counts:
            got, want = prog.forward(x[:m]), portable(x[:m])
            for i, (g, w) in enumerate(zip(got, want)):
                assert g.view(np.uint32).tolist() == w.view(np.uint32).tolist(), (isa, m, i)
    return portable


def test_int8_compute_runs_on_the_optimized_tier_bit_exact(torch, tmp_path):
    """compute="int8" (inputs quantized per 32-block at run time, integer dot products) is served by
    the optimized tier at every level, and equals the reference tier bit for bit at any row count
    (decode steps and prefills), for every split scheme, with and without bias, and a q8_0 row
    length that is not a multiple of 32; the eager quantized model agrees within float rounding."""
    from kiln.export import export
    from kiln.export.quantize import QuantizedLinear, quantize_weight

    k, capacity = 576, 80

    class Layers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(4)
            specs = [("q4_0", 32), ("q4_1", 64), ("q8_0", 32), ("q8_0", k)]
            self.q = torch.nn.ModuleList(
                QuantizedLinear(quantize_weight(torch.randn(n, k) * 0.05, scheme, group),
                                bias=torch.randn(n) if i % 2 else None, compute="int8")
                for i, ((scheme, group), n) in enumerate(zip(specs, (300, 17, 64, 45))))
            self.odd = QuantizedLinear(quantize_weight(torch.randn(23, 37) * 0.05, "q8_0", 37), compute="int8")

        def forward(self, x):
            return tuple(layer(x) for layer in self.q) + (self.odd(x[:, :37]),)

    model = Layers().eval()
    path = tmp_path / "int8.kiln"
    rows = torch.export.Dim("rows", max=capacity)
    export(model, (torch.randn(4, k),), path, dynamic_shapes=({0: rows},))
    x = np.random.default_rng(6).standard_normal((capacity, k)).astype(np.float32)
    x[2] = 0.0  # a zero row: dx = 0
    x[5, 7] = 40.0  # one large value: the other values of its block round to few levels
    portable = _optimized_equals_portable_at_every_level(path, x, (1, 3, 16, 17, 64, 80))
    with torch.no_grad():
        eager = model(torch.from_numpy(x))
    for g, e in zip(portable(x), eager):
        e = e.numpy()
        assert np.abs(g - e).max() <= 1e-5 * np.abs(e).max()


def test_int8_row_compute_is_bit_exact_at_every_level_and_in_eager(torch, tmp_path):
    """compute="int8_row" (q8_0 per output channel; each input row quantized to bytes with one scale and
    zero point) is served by the optimized tier at every level and equals the reference tier bit for
    bit at any row count; eager PyTorch (ops.py's reference) gives the same bits, so the Python and
    C++ references agree. Rows of zeros, of one sign only, with an outlier or a NaN are included."""
    from kiln.export import export
    from kiln.export.quantize import QuantizedLinear, quantize_weight

    k, capacity = 384, 80

    class Layers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(5)
            self.q = torch.nn.ModuleList(
                QuantizedLinear(quantize_weight(torch.randn(n, k) * 0.05, "q8_0", k),
                                bias=torch.randn(n) if i % 2 else None, compute="int8_row")
                for i, n in enumerate((48, 17, 100)))
            self.odd = QuantizedLinear(quantize_weight(torch.randn(23, 37) * 0.05, "q8_0", 37), compute="int8_row")

        def forward(self, x):
            return tuple(layer(x) for layer in self.q) + (self.odd(x[:, :37]),)

    model = Layers().eval()
    path = tmp_path / "int8_row.kiln"
    rows = torch.export.Dim("rows", max=capacity)
    export(model, (torch.randn(4, k),), path, dynamic_shapes=({0: rows},))
    x = np.random.default_rng(7).standard_normal((capacity, k)).astype(np.float32)
    x[2] = 0.0                       # s = 0
    x[3] = np.abs(x[3])              # z = 0
    x[4] = -np.abs(x[4])             # z = 255
    x[5, 7] = 40.0                   # the other values of the row round to few levels
    x[6, 11] = np.nan                # the row's outputs are NaN
    portable = _optimized_equals_portable_at_every_level(path, x, (1, 3, 8, 9, 17, 64, 80))
    with torch.no_grad():
        eager = model(torch.from_numpy(x))
    for g, e in zip(portable(x), eager):
        assert np.isnan(g[6]).all() and np.isnan(e.numpy()[6]).all()
        assert g.view(np.uint32).tolist() == e.numpy().view(np.uint32).tolist()


def test_int8_dynamic_option(torch):
    from kiln.export.quantize import QuantizedLinear, quantize

    model = _Small.make(torch)
    q = quantize(model, "int8_dynamic")
    assert isinstance(q.l1, QuantizedLinear) and q.l1.compute == "int8_row" and q.l1.scheme == "q8_0"
    assert q.l1.group_size == 128  # one scale per output channel
    assert quantize(model, "int8").l1.compute == "float32"
    with pytest.raises(ValueError, match="int8_dynamic computes in int8_row"):
        quantize(model, "int8_dynamic", compute="float32")
    with pytest.raises(ValueError, match="int8_dynamic keeps one scale per output channel"):
        quantize(model, "int8_dynamic", group_size=32)
    with pytest.raises(ValueError, match="compute='int8_row' takes int8 weights with one scale per output channel"):
        quantize(model, "int4", compute="int8_row")
    # The tied head shares a 4-bit embedding: int8_row cannot take it, so it computes per 32-block.
    tied = quantize(model, "int8_dynamic", embeddings="int4")
    assert (tied.l1.compute, tied.head.compute, tied.head.scheme) == ("int8_row", "int8", "q4_1")


MINILM_SENTENCES = ("A man is eating food.", "The new movie is awesome.", "kiln runs exported models on the CPU.",
                    "Two dogs are playing in the snow near a frozen lake.", "Hi",
                    "The quarterly report shows revenue growth of 12 percent across all regions, driven by exports.",
                    "Wie spät ist es?", "A quick brown fox jumps over the lazy dog while the cat sleeps.")


@pytest.mark.full
def test_minilm_int8_dynamic_embeddings_keep_their_direction(torch, tmp_path):
    """export(..., quantize="int8_dynamic"): every linear of MiniLM in int8 weights per output
    channel and int8 inputs, on the optimized tier; the sentence embeddings keep a cosine of at
    least 0.99 to eager float32 on a fixed sentence set (measured: docs/quantization.md). Full tier:
    the export of the whole model takes most of a minute; the default tier exports a small model
    with int8_dynamic (test_export_quantize_matches_eager_quantized_model)."""
    from kiln.export import export

    from zoo import minilm as zoo_minilm

    model = zoo_minilm.load_minilm()
    ids, mask = zoo_minilm.encode_inputs(MINILM_SENTENCES[0])
    seq = torch.export.Dim("seq", max=128)
    path = tmp_path / "minilm_int8.kiln"
    export(model, (ids, mask), path, dynamic_shapes=({1: seq}, {1: seq}), quantize="int8_dynamic")
    method = kiln.load(path).method("forward")
    linears = [i for i in method.instructions if i.op == "kiln_quantized::linear.default"]
    assert len(linears) == 6 * 6 and {i.tier for i in linears} == {kiln.kernel_tiers()["optimized"]}
    cosines = []
    for text in MINILM_SENTENCES:
        ids, mask = zoo_minilm.encode_inputs(text)
        with torch.no_grad():
            want = model(ids, mask).numpy()[0]
        (got,) = method(ids.numpy(), mask.numpy())
        cosines.append(float(np.dot(got[0], want) / (np.linalg.norm(got[0]) * np.linalg.norm(want))))
    print(f"\nMiniLM int8_dynamic cosine to float32: min {min(cosines):.5f}, mean {np.mean(cosines):.5f}")
    assert min(cosines) >= 0.99, cosines
