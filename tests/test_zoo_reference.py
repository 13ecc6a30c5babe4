"""The eager reference models of tests/zoo are right (they have no other reference here).

MiniLM is checked against the similarity scores sentence-transformers
documents for all-MiniLM-L6-v2, SmolLM2 by what it answers and by its KV cache
agreeing with a full prefill, both tokenizers against ids read from the
models' own vocabulary files. Missing weight packages fail these tests (CI
installs them through scripts/setup.sh); they are never skipped.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from zoo import minilm, smollm2, vision

pytestmark = pytest.mark.build_independent


def _load(loader, *args, **kwargs):
    try:
        return loader(*args, **kwargs)
    except RuntimeError as e:  # the missing-package message
        message = str(e)
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def bert():
    return _load(minilm.load_minilm)


@pytest.fixture(scope="module")
def llama():
    return _load(smollm2.load_smollm2)


@pytest.fixture(scope="module")
def bpe():
    return _load(smollm2.load_tokenizer)


def test_weight_packages_installed():
    problems = []
    for locate in (minilm.model_dir, smollm2.gguf_path):
        try:
            locate()
        except RuntimeError as e:
            problems.append(str(e))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


# --------------------------------------------------------------------------- MiniLM


def test_minilm_tokenizer_matches_vocab():
    vocab = json.loads((_load(minilm.model_dir) / "tokenizer.json").read_text())["model"]["vocab"]
    words = ["[CLS]", "a", "man", "is", "eating", "food", ".", "[SEP]"]
    assert minilm.tokenize("A man is eating food.") == [vocab[w] for w in words]
    # lowercase, accents stripped, punctuation split, WordPiece continuation pieces
    pieces = ["[CLS]", "hello", ",", "world", "!", "una", "##ffa", "##ble", "[SEP]"]
    assert minilm.tokenize("Héllo, WORLD! unaffable") == [vocab[p] for p in pieces]
    assert minilm.tokenize("") == [vocab["[CLS]"], vocab["[SEP]"]]


def test_minilm_embeddings_are_unit_norm(bert):
    for text in ["A man is eating food.", "", "x " * 300]:  # also empty and truncated input
        ids, mask = minilm.encode_inputs(text)
        assert ids.shape[1] <= minilm.MAX_SEQ_LEN
        with torch.no_grad():
            e = bert(ids, mask)
        assert e.shape == (1, 384) and e.dtype == torch.float32
        assert abs(float(e.norm()) - 1.0) < 1e-5


def test_minilm_paraphrase_is_closer_than_unrelated(bert):
    food, bread, movie = (minilm.embed(bert, t) for t in
                          ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome."])
    close, far = float(food @ bread), float(food @ movie)
    assert close > 0.6 and far < 0.2 and close > far + 0.4, (close, far)


def test_minilm_matches_published_scores(bert):
    # The cosine similarities printed for all-MiniLM-L6-v2 in sentence-transformers'
    # documentation (sbert.net, "Usage"): any mistake in the model or the tokenizer
    # moves them by far more than the tolerance.
    texts = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    e = torch.stack([minilm.embed(bert, t) for t in texts])
    sims = (e @ e.T).numpy()
    expected = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
    np.testing.assert_allclose(sims, expected, atol=2e-3)


def test_minilm_padding_is_masked(bert):
    ids, mask = minilm.encode_inputs("A man is eating food.")
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=ids.dtype)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(1, 5, dtype=mask.dtype)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(bert(padded, padded_mask), bert(ids, mask), atol=1e-5, rtol=0)


# --------------------------------------------------------------------------- SmolLM2


def test_gguf_qk_unpermute_inverts_the_converter():
    # llama.cpp convert_hf_to_gguf.py, LlamaModel.permute (what the GGUF holds)
    def permute(w, n_head):
        return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    w = np.random.default_rng(0).standard_normal((3 * 64, 576)).astype(np.float32)
    np.testing.assert_array_equal(smollm2._unpermute_rope_rows(permute(w, 3), 3), w)


def test_smollm2_tokenizer_matches_vocab(bpe):
    ids = bpe.encode("What is the capital of France?")
    assert [bpe.tokens[i] for i in ids] == ["What", "Ġis", "Ġthe", "Ġcapital", "Ġof", "ĠFrance", "?"]
    assert [bpe.tokens[i] for i in bpe.encode("In 2024")] == ["In", "Ġ", "2", "0", "2", "4"]  # digits split
    chat = bpe.chat_prompt("Hi")
    assert chat[0] == bpe.ids["<|im_start|>"] and bpe.ids["<|im_end|>"] in chat
    for text in ["What is the capital of France?", "naïve café 😀\n\n  x", bpe.decode(chat)]:
        assert bpe.decode(bpe.encode(text)) == text


def test_smollm2_cache_matches_full_prefill(llama, bpe):
    ids = bpe.chat_prompt("Name three colors.")
    n, split = len(ids), len(ids) - 6
    with torch.no_grad():
        smollm2.reset_cache(llama)
        full = llama(torch.tensor([ids]), torch.arange(n))
        smollm2.reset_cache(llama)
        parts = [llama(torch.tensor([ids[:split]]), torch.arange(split))]
        for p in range(split, n):
            parts.append(llama(torch.tensor([[ids[p]]]), torch.tensor([p])))
    stepped = torch.cat(parts, dim=1)
    assert stepped.shape == full.shape == (1, n, llama.cfg.vocab_size)
    scale = float(full.abs().max())
    assert float((stepped - full).abs().max()) <= 1e-4 * scale
    assert torch.equal(stepped.argmax(-1), full.argmax(-1))


def test_smollm2_answers_paris(llama, bpe):
    out = smollm2.greedy_generate(llama, bpe.chat_prompt("What is the capital of France?"), 20,
                                  eos_id=bpe.eos_id)
    text = bpe.decode(out)
    print(repr(text))
    assert "Paris" in text, text


def test_smollm2_cache_is_a_buffer_updated_in_place(llama, bpe):
    cache = llama.layers[0].attention.k_cache
    kv, capacity = llama.cfg.n_kv_heads, llama.capacity
    assert cache.shape == (llama.slots * kv * capacity, llama.cfg.head_dim)  # rows (slot, kv head, position)
    smollm2.reset_cache(llama)
    ptr = cache.data_ptr()
    with torch.no_grad():
        llama(torch.tensor([bpe.encode("Hello")[:1]]), torch.arange(1))
    by_position = cache.reshape(llama.slots, kv, capacity, -1)
    assert cache.data_ptr() == ptr and bool(by_position[0, :, 0].abs().sum() > 0)
    assert float(by_position[0, :, 1:].abs().sum()) == 0.0 and float(by_position[1:].abs().sum()) == 0.0
    assert "layers.0.attention.k_cache" not in llama.state_dict()  # non-persistent: weights only


# --------------------------------------------------------------------------- vision


@pytest.mark.parametrize("name", vision.MODELS)
def test_vision_model_runs(name):
    model, x = vision.build(name)
    assert tuple(x.shape) == vision.INPUT_SHAPE
    with torch.no_grad():
        y = model(x)
        again = vision.build(name)[0](x)
    assert y.shape == (1, 1000) and bool(torch.isfinite(y).all())
    assert float(y.std()) > 1e-3                  # not collapsed to a constant
    torch.testing.assert_close(y, again, rtol=0, atol=0)  # deterministic
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns and all(float(bn.running_mean.abs().max()) > 1e-3 and float((bn.running_var - 1).abs().max()) > 1e-2
                       for bn in bns)  # no BN has default statistics
    assert not model.training
