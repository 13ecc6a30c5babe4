"""Real models through kiln against eager PyTorch (within 1e-4 of the output's scale).

all-MiniLM-L6-v2 (real weights, dynamic sequence length), SmolLM2-135M-Instruct
(real weights, KV cache as mutable state, dynamic token count) and two mobile
CNNs (random weights). Each model is exported once per session; the eager
references are tests/zoo (checked on their own by test_zoo_reference.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import kiln

from conftest import assert_close, clean_env

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SMOL_CAPACITY = 128     # KV cache positions (prompt + generated tokens)
MINILM_MAX_LEN = 128    # the dynamic sequence length's bound


def _fail_if_missing(loader, *args, **kwargs):
    try:
        return loader(*args, **kwargs)
    except RuntimeError as e:  # the zoo's "install package X" message
        pytest.fail(str(e), pytrace=False)


def instruction_kinds(path) -> dict:
    """{instruction kind name: count} of every method of a .kiln file."""
    from kiln.export import _schema as S
    from kiln.export.lowering.serialize import parse_header

    data = path.read_bytes()
    header = parse_header(data)
    program = S.Program.GetRootAs(data, header.flatbuffer_offset)
    names = {v: k for k, v in vars(S.InstructionKind).items() if not k.startswith("_")}
    counts: dict = {}
    for m in range(program.MethodsLength()):
        method = program.Methods(m)
        for i in range(method.InstructionsLength()):
            kind = names[method.Instructions(i).InstructionType()]
            counts[kind] = counts.get(kind, 0) + 1
    return counts


# -- all-MiniLM-L6-v2 -------------------------------------------------------------

@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    import torch

    from kiln.export import export

    from zoo import minilm as zoo_minilm

    model = _fail_if_missing(zoo_minilm.load_minilm)
    ids, mask = zoo_minilm.encode_inputs("kiln runs exported models on the CPU.")
    seq = torch.export.Dim("seq", max=MINILM_MAX_LEN)
    path = tmp_path_factory.mktemp("zoo") / "minilm.kiln"
    export(model, (ids, mask), path, dynamic_shapes=({1: seq}, {1: seq}))
    return model, path


@pytest.mark.parametrize("kernels", ["optimized", "portable"])
@pytest.mark.parametrize("length", [1, 2, 9, 37, MINILM_MAX_LEN])
def test_minilm_embeddings_match_eager_at_any_length(torch, minilm, length, kernels):
    model, path = minilm
    method = kiln.load(path, kernels=kernels).method("forward")
    assert method.input_specs[0].shape == (1, MINILM_MAX_LEN)
    assert method.input_specs[0].dynamic_dims == (1,)
    gen = torch.Generator().manual_seed(length)
    ids = torch.randint(1000, model.cfg.vocab_size, (1, length), generator=gen)
    ids[0, 0], ids[0, -1] = 101, 102  # [CLS] ... [SEP]
    mask = torch.ones_like(ids)
    with torch.no_grad():
        want = model(ids, mask).numpy()
    (got,) = method(ids.numpy(), mask.numpy())
    assert got.shape == (1, 384)
    assert_close(got, want, 1e-4)


def test_minilm_sentences_and_padding_match_eager(torch, minilm):
    from zoo import minilm as zoo_minilm

    model, path = minilm
    method = kiln.load(path).method("forward")
    for text in ("A man is eating food.", "The new movie is awesome.", "Hi"):
        ids, mask = zoo_minilm.encode_inputs(text)
        # Padding to a longer length with a zero mask must not change the embedding.
        padded = torch.nn.functional.pad(ids, (0, 5))
        padded_mask = torch.nn.functional.pad(mask, (0, 5))
        with torch.no_grad():
            want = model(ids, mask).numpy()
        (got,) = method(ids.numpy(), mask.numpy())
        (got_padded,) = method(padded.numpy(), padded_mask.numpy())
        assert_close(got, want, 1e-4)
        assert_close(got_padded, want, 1e-4)


def test_minilm_refuses_sequences_beyond_the_bound(minilm):
    _, path = minilm
    too_long = np.ones((1, MINILM_MAX_LEN + 1), np.int64)
    with pytest.raises(kiln.InvalidInput, match="input_ids"):
        kiln.load(path).forward(too_long, too_long)


def test_minilm_kiln_profile_and_trace(minilm, tmp_path):
    """kiln profile on MiniLM: a table of its operators and a trace that parses as
    Chrome trace JSON with a span per call and per instruction (the share of the
    call's wall time the table covers is printed, not asserted: no timing test)."""
    from zoo import minilm as zoo_minilm

    _, path = minilm
    ids, mask = zoo_minilm.encode_inputs("A man is eating food.")
    np.save(tmp_path / "ids.npy", ids.numpy())
    np.save(tmp_path / "mask.npy", mask.numpy())
    trace = tmp_path / "minilm.json"
    proc = subprocess.run([sys.executable, "-m", "kiln", "profile", str(path), str(tmp_path / "ids.npy"),
                           str(tmp_path / "mask.npy"), "--runs", "2", "--trace", str(trace)],
                          capture_output=True, text=True, env=clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    n = len(kiln.load(path).method("forward").instructions)
    assert f"method 'forward': 2 calls, {n} instructions per call" in proc.stdout
    assert "linear" in proc.stdout and "total of the instructions" in proc.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert sum(e["cat"] == "call" for e in spans) == 2
    assert sum(e["cat"] not in ("call", "chunk") for e in spans) == 2 * n


# -- SmolLM2-135M-Instruct ----------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    import torch

    from kiln.export import export

    from zoo import smollm2 as zoo_smollm2

    model = _fail_if_missing(zoo_smollm2.load_smollm2, capacity=SMOL_CAPACITY)
    tokenizer = zoo_smollm2.load_tokenizer()
    tokens = torch.export.Dim("tokens", max=SMOL_CAPACITY)
    path = tmp_path_factory.mktemp("zoo") / "smollm2.kiln"
    example = (torch.zeros(1, 4, dtype=torch.int64), torch.arange(4))
    export(model, example, path, dynamic_shapes=({1: tokens}, {0: tokens}))
    zoo_smollm2.reset_cache(model)  # export traces forward; start eager from an empty cache
    return model, tokenizer, path


def _steps(torch, model, method, prompt, n_steps):
    """Prefill `prompt`, then n_steps greedy single-token steps, in eager and in kiln
    side by side; yields (eager logits, kiln logits) of each call."""
    ids, pos = torch.tensor([prompt]), torch.arange(len(prompt))
    for step in range(n_steps + 1):
        with torch.no_grad():
            want = model(ids, pos).numpy()
        (got,) = method(ids.numpy(), pos.numpy())
        yield want, got
        next_id = int(want[0, -1].argmax())
        position = len(prompt) + step
        ids, pos = torch.tensor([[next_id]]), torch.tensor([position])


@pytest.mark.parametrize("kernels", ["optimized", "portable"])
def test_smollm2_prefill_and_steps_match_eager(torch, smollm2, kernels):
    from zoo import smollm2 as zoo_smollm2

    model, tokenizer, path = smollm2
    method = kiln.load(path, kernels=kernels).load_method("forward")
    assert len(method.state_specs) == 2 * model.cfg.n_layers  # a k and a v cache per layer
    zoo_smollm2.reset_cache(model)
    prompt = tokenizer.chat_prompt("Name three colors.")
    for call, (want, got) in enumerate(_steps(torch, model, method, prompt, n_steps=5)):
        assert got.shape == want.shape == (1, len(prompt) if call == 0 else 1, model.cfg.vocab_size)
        assert_close(got, want, 1e-4, f"call {call}")
        assert int(got[0, -1].argmax()) == int(want[0, -1].argmax())


def test_smollm2_greedy_decoding_gives_eager_token_ids(torch, smollm2):
    from zoo import smollm2 as zoo_smollm2

    model, tokenizer, path = smollm2
    prompt = tokenizer.chat_prompt("What is the capital of France?")
    zoo_smollm2.reset_cache(model)
    want = zoo_smollm2.greedy_generate(model, prompt, 20)

    method = kiln.load(path).load_method("forward")
    got = []
    (logits,) = method(np.array([prompt], np.int64), np.arange(len(prompt), dtype=np.int64))
    for step in range(20):
        token = int(logits[0, -1].argmax())
        got.append(token)
        if len(got) == 20:
            break
        (logits,) = method(np.array([[token]], np.int64), np.array([len(prompt) + step], np.int64))
    assert got == want, (tokenizer.decode(got), tokenizer.decode(want))
    assert "Paris" in tokenizer.decode(got)

    # A reset cache gives the same first token again; so does a second method.
    method.reset_state()
    (again,) = method(np.array([prompt], np.int64), np.arange(len(prompt), dtype=np.int64))
    assert int(again[0, -1].argmax()) == got[0]


def test_smollm2_cache_is_updated_in_place(smollm2):
    """The cache updates write the state directly: no Move copies a cache back."""
    _, _, path = smollm2
    kinds = instruction_kinds(path)
    assert kinds.get("Move", 0) == 0, kinds
    assert kinds.get("IntOp", 0) >= 1  # the token count is read at run time


# -- mobile CNNs --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mobilenet_v3_small", "efficientnet_like"])
def test_mobile_cnns_match_eager(torch, tmp_path, name):
    from kiln.export import export

    from zoo import vision

    model, x = vision.build(name)
    path = tmp_path / f"{name}.kiln"
    export(model, (x,), path)
    for kernels, seed in (("optimized", 0), ("optimized", 1), ("portable", 1)):
        method = kiln.load(path, kernels=kernels).method("forward")
        inp = x if seed == 0 else torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            want = model(inp).numpy()
        (got,) = method(inp.numpy())
        assert_close(got, want, 1e-4, what=kernels)
