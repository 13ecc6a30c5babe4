"""kiln.llm's tokenizer equals Hugging Face `tokenizers` on SmolLM2's vocabulary, read from
both sources kiln supports: the GGUF file's metadata and a tokenizer.json.

The reference is built here with the `tokenizers` library from the vocabulary,
merges and token types that tests/zoo/smollm2.py read with the independent
`gguf` package: BPE (unk "<|endoftext|>", as tokenizer.ggml.unknown_token_id 0
says), pre-tokenizers Digits(individual) + ByteLevel (tokenizer.ggml.pre
"smollm"), ByteLevel decoder, control tokens as special added tokens. Its
tokenizer.json (`to_str()`) is the file kiln reads for the second source.

The characters Unicode 15.0 to 17.0 added split as `tokenizers` splits them
(each on its own, and in 3,000 random texts). Also: streaming decoding never
emits half a character and adds up to decode(); bad tokenizer input is a clear
error.

The other families, each against an independent reference on a vocabulary trained
here: Llama 3 ("llama-bpe") and Qwen2 ("qwen2") splits against `tokenizers` (Split +
ByteLevel), from GGUF and tokenizer.json; SentencePiece (GGUF tokenizer.ggml.model
"llama") against the `sentencepiece` package, from GGUF, from the tokenizer.json
to_json writes (read by `tokenizers` too) and through `kiln llm export`.
"""

from __future__ import annotations

import json
import random

import pytest

import kiln
from kiln.llm import StreamDecoder, Tokenizer

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>"]

# The Split regexes of Llama 3 and Qwen2's tokenizer.json files, by their tokenizer.ggml.pre.
SPLIT_PATTERNS = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+",
}

CORPUS = [
    "Hello world! The quick brown fox jumps over the lazy dog.",
    "don't I'll we've they're It's 'quoted' DON'T you'd we'll",
    "  leading spaces and\ttabs\n\n\nnewlines   trailing   ",
    "x   y\n  z\r\n\r\nw \n \n end",
    "\u00a0non-breaking\u2003em space\u3000ideographic space\u202fnarrow",
    "Zürich, Genève, Kraków, São Paulo, Ærøskøbing, İstanbul, ß",
    "Ελληνικά, русский текст, українська, עברית, العربية, فارسی",
    "हिन्दी में लिखा गया वाक्य। தமிழ் எழுத்து. ภาษาไทยไม่มีช่องว่าง",
    "日本語のテキスト、ひらがなとカタカナ。中文文本和标点符号！한국어 문장입니다.",
    "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 keycap 1️⃣ heart ❤️ 🫠",
    "numbers 1234567 3.14159 -42 1e10 ٣٤٥ ６７ ⅫⅣ ½ ²",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "special<|endoftext|>glued<|im_end|><|im_start|> and broken <|im_start <|im_end|",
    "code: def f(x):\n    return {'a': x**2, \"b\": [1, 2]}  # comment\n\tpass",
    "URLs https://example.com/a?b=c&d=e#f and emails me@example.org",
    "math ∑_{i=1}^{n} i² = n(n+1)/2 ≤ ∞, ∀x∈ℝ: |x| ≥ 0 → ✓",
    "controls a\x1cb\x1dc\x00d\x7fe",
    "   ",
    "\n",
    "a",
    "",
]


def _random_texts(n: int, seed: int) -> list:
    """Random mixes of the hard parts: letters of several scripts, digits,
    whitespace runs, punctuation, emoji, specials."""
    rng = random.Random(seed)
    atoms = ["a", "Z", "é", "ß", "ж", "λ", "ע", "ع", "न", "ि", "ก", "日", "本", "한", "😀", "👍🏽", "‍", "7", "٣", "½",
             " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "'", "'s", "'ll", ".", ",", "!", "?", "-", "_", "(",
             ")", "\"", "#", "$", "%", "&", "*", "/", "\\", "~"] + SPECIALS
    return ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 40))) for _ in range(n)]


TEXTS = CORPUS + _random_texts(300, seed=10)


@pytest.fixture(scope="module")
def vocab():
    from zoo import smollm2

    return smollm2._load(weights=False)[2]


@pytest.fixture(scope="module")
def reference(vocab):
    """SmolLM2's tokenizer in Hugging Face `tokenizers`, built from the GGUF vocabulary."""
    from tokenizers import AddedToken, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    assert vocab["pre"] == "smollm"
    ids = {t: i for i, t in enumerate(vocab["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in vocab["merges"]]
    hf = HFTokenizer(models.BPE(ids, merges, unk_token=vocab["tokens"][0]))
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, kind in zip(vocab["tokens"], vocab["token_types"]) if kind == 3])
    return hf


@pytest.fixture(scope="module")
def from_gguf():
    from zoo import smollm2

    return Tokenizer.from_gguf(str(smollm2.gguf_path()))


@pytest.fixture(scope="module")
def from_json(reference, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    path.write_text(reference.to_str())
    return Tokenizer.from_json_file(str(path))


@pytest.fixture(params=["gguf", "tokenizer.json"])
def ours(request, from_gguf, from_json):
    return from_gguf if request.param == "gguf" else from_json


def test_vocabulary_and_special_tokens(ours, vocab, from_gguf):
    assert ours.vocab_size == len(vocab["tokens"]) == 49152
    assert ours.special_ids == [i for i, kind in enumerate(vocab["token_types"]) if kind == 3]
    assert ours.id_to_token(1) == "<|im_start|>" and ours.token_to_id("<|im_end|>") == 2
    assert (from_gguf.bos_id, from_gguf.eos_id) == (vocab["bos_id"], vocab["eos_id"])


def test_encode_equals_hugging_face(ours, reference):
    assert len(TEXTS) > 300
    for text in TEXTS:
        want = reference.encode(text, add_special_tokens=False).ids
        assert ours.encode(text) == want, repr(text)


def _newer_characters() -> list:
    """Characters Python 3.11's unicodedata (Unicode 14.0) leaves unassigned but the
    `regex` package (Unicode 17.0) knows: the additions of Unicode 15.0 to 17.0."""
    import unicodedata

    import regex  # the test extra
    assigned = regex.compile(r"[^\p{Cn}\p{Cs}\p{Co}]")
    return [chr(cp) for cp in range(0x80, 0x110000)
            if unicodedata.category(chr(cp)) == "Cn" and assigned.match(chr(cp))]


def _boundary_tokenizer(pre: str):
    """A byte-level BPE whose merges join "a", "1" or " " with the first byte of any multi-byte
    character: its ids show whether a character ends up in the same piece as the letter,
    digit or space before it, that is, which class the pre-tokenizer gives it. `pre`:
    "gpt2_split" (ByteLevel's own regex), "digits" (a Digits(individual_digits=False) step
    first: Rust's char::is_numeric), or a key of SPLIT_PATTERNS (Split + ByteLevel without regex)."""
    from tokenizers import Regex, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_char = {}
    for b in range(256):  # GPT-2's byte-to-character map, as build_byte_alphabet has it
        byte_char[b] = chr(b) if chr(b) in alphabet and b not in range(0x7F, 0xA1) and b != 0xAD and b > 0x20 \
            else None
    extra = 0
    for b in range(256):
        if byte_char[b] is None:
            byte_char[b] = chr(256 + extra)
            extra += 1
    vocab = {byte_char[b]: b for b in range(256)}
    merges = []
    for first in ("a", "1", byte_char[0x20]):
        for lead in range(0xC2, 0xF5):
            merges.append((first, byte_char[lead]))
            vocab[first + byte_char[lead]] = len(vocab)
    hf = HFTokenizer(models.BPE(vocab, merges))
    split = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "digits":
        split = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False), split])
    elif pre in SPLIT_PATTERNS:
        split = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLIT_PATTERNS[pre]), "isolated"),
                                         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.pre_tokenizer = split
    hf.decoder = decoders.ByteLevel()
    return hf, Tokenizer.from_json(hf.to_str())


@pytest.mark.parametrize("pre", ["gpt2_split", "digits", "llama-bpe", "qwen2"])
def test_characters_of_unicode_15_to_17_split_as_hugging_face(pre):
    """Each newer character after a letter, a digit and a space lands in the piece
    `tokenizers` puts it in (its regexes know Unicode 16.0, its Digits Rust's 17.0)."""
    newer = _newer_characters()
    assert len(newer) > 10000 and "\U00011de0" in newer and "\U00031350" in newer  # Tolong Siki 0, CJK ext. H
    hf, ours = _boundary_tokenizer(pre)
    assert ours.encode("a\u00e9") != ours.encode("a\u00e9"[0]) + ours.encode("\u00e9")  # the merges do join
    texts = [f"a{c} 1{c} {c}a.{c}\n{c}" for c in newer]
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    wrong = [t for t, w in zip(texts, want) if ours.encode(t) != w]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, e.g. {[hex(ord(t[1])) for t in wrong[:8]]}"


def test_random_texts_with_newer_characters_equal_hugging_face(ours, reference):
    rng = random.Random(16)
    newer = _newer_characters()
    atoms = ["a", "é", "日", "7", "٣", " ", "  ", "\n", "'s", ".", "😀"]
    texts = ["".join(rng.choice(newer) if rng.random() < 0.3 else rng.choice(atoms) for _ in range(rng.randint(1, 30)))
             for _ in range(3000)]
    want = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
    wrong = [t for t, w in zip(texts, want) if ours.encode(t) != w]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, e.g. {wrong[:3]!r}"


def test_encode_of_long_text_equals_hugging_face(ours, reference):
    text = " ".join(CORPUS) * 20
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


def test_special_tokens_as_plain_text(ours, reference):
    """parse_special=False: the markup is text, as `tokenizers` does with split_special_tokens."""
    reference.encode_special_tokens = True
    try:
        for text in CORPUS[11:13]:
            assert ours.encode(text, parse_special=False) == reference.encode(text, add_special_tokens=False).ids
    finally:
        reference.encode_special_tokens = False
    assert 1 not in ours.encode("<|im_start|>", parse_special=False)


def test_decode_equals_hugging_face(ours, reference):
    for text in TEXTS:
        ids = reference.encode(text, add_special_tokens=False).ids
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False), repr(text)
        if "\x1d" not in text:  # a byte the vocabulary lacks becomes the unknown token
            assert ours.decode(ids) == text
        assert ours.decode(ids, skip_special=True) == reference.decode(ids, skip_special_tokens=True), repr(text)


def test_decode_of_arbitrary_ids_equals_hugging_face(ours, reference):
    """Id sequences that cut characters apart: both replace the broken bytes with U+FFFD alike."""
    rng = random.Random(3)
    broken = 0
    for _ in range(300):
        ids = [rng.randrange(ours.vocab_size) for _ in range(rng.randint(1, 12))]
        want = reference.decode(ids, skip_special_tokens=False)
        broken += "\ufffd" in want
        assert ours.decode(ids) == want, ids
    assert broken > 10  # the sample does exercise invalid UTF-8


def test_to_json_round_trips_through_hugging_face(from_gguf, reference):
    from tokenizers import Tokenizer as HFTokenizer

    again = HFTokenizer.from_str(from_gguf.to_json())
    for text in TEXTS[:60]:
        assert again.encode(text, add_special_tokens=False).ids == reference.encode(text, add_special_tokens=False).ids


def test_stream_decoder_never_emits_half_a_character(from_gguf):
    text = "日本 😀👨‍👩‍👧 ÿ".encode("utf-8").decode("utf-8")
    ids = from_gguf.encode(text)
    split = [i for i in ids if not from_gguf.token_bytes(i).decode("utf-8", errors="ignore")]
    assert split, "the text should contain tokens that are parts of a character"
    decoder = StreamDecoder(from_gguf)
    pieces = [decoder.push(i) for i in ids] + [decoder.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    assert "" in pieces  # a token that completed no character gave nothing yet


def test_stream_decoder_adds_up_to_decode(from_gguf):
    rng = random.Random(5)
    for _ in range(200):
        ids = [rng.randrange(from_gguf.vocab_size) for _ in range(rng.randint(1, 10))]
        for skip in (False, True):
            decoder = StreamDecoder(from_gguf, skip)
            streamed = "".join(decoder.push(i) for i in ids) + decoder.flush()
            assert streamed == from_gguf.decode(ids, skip_special=skip), ids


def test_out_of_range_ids_are_errors(from_gguf):
    with pytest.raises(kiln.InvalidArgument, match="token id 49152 is outside the vocabulary of 49152"):
        from_gguf.decode([1, 49152])
    with pytest.raises(kiln.InvalidArgument, match="outside the vocabulary"):
        StreamDecoder(from_gguf).push(-1)


def _train_split_family(pre: str):
    """A byte-level BPE of 1,200 tokens trained here (deterministically) on the corpus with
    Llama 3's Split pattern (so that it has tokens of several digits, which Qwen2's split
    must never produce), rebuilt as the reference with `pre`'s pattern: Llama 3's
    tokenizer.json sets ignore_merges (llama.cpp does for "llama-bpe"), Qwen2's does not."""
    from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, trainers
    from tokenizers import Tokenizer as HFTokenizer

    def pre_tokenizer(pre):
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLIT_PATTERNS[pre]), "isolated"),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])

    trained = HFTokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizer("llama-bpe")
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=SPECIALS, show_progress=False)
    numbers = [f"{i} {i * 7919} {i:04d}" for i in range(400)]
    trained.train_from_iterator(CORPUS * 3 + _random_texts(500, seed=1) + numbers, trainer)
    model = json.loads(trained.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    hf = HFTokenizer(models.BPE(model["vocab"], merges, ignore_merges=pre == "llama-bpe"))
    hf.pre_tokenizer = pre_tokenizer(pre)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    assert {"12", "123"} <= set(model["vocab"])
    tokens = sorted(model["vocab"], key=model["vocab"].get)
    assert [model["vocab"][t] for t in tokens] == list(range(len(tokens)))
    return hf, tokens, [" ".join(m) for m in merges]


@pytest.fixture(scope="module", params=["llama-bpe", "qwen2"])
def split_family(request, tmp_path_factory):
    """(pre, reference, kiln's tokenizer from a GGUF, kiln's from the reference's tokenizer.json)."""
    from llm_files import write_gguf

    pre = request.param
    hf, tokens, merges = _train_split_family(pre)
    meta = {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre,
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": [3 if t in SPECIALS else 1 for t in tokens],
            "tokenizer.ggml.merges": merges, "tokenizer.ggml.eos_token_id": tokens.index("<|endoftext|>")}
    path = write_gguf(tmp_path_factory.mktemp(pre) / "tokenizer.gguf", meta)
    return pre, hf, Tokenizer.from_gguf(str(path)), Tokenizer.from_json(hf.to_str())


SPLIT_TEXTS = CORPUS + _random_texts(2000, seed=23) + [
    "'S 'T 'RE 'Ve 'M 'LL 'D 'ſ x'ſx 'K 'x", "1 12 123 1234 12345 ١٢٣٤ 7½", "a\r\n\r\n b\n\n\t x  \n  y \t\nz",
    "...\n\n!! ?\r\n(word [x] 😀ab \u3000ab \tab \nab", "word  \n", "   \n\n   ", "\r", "\r\n \r\n"]


def test_llama3_and_qwen2_encode_and_decode_equal_hugging_face(split_family):
    pre, hf, from_gguf, from_json = split_family
    assert from_gguf.special_ids == from_json.special_ids == sorted(hf.token_to_id(t) for t in SPECIALS)
    want = [e.ids for e in hf.encode_batch(SPLIT_TEXTS, add_special_tokens=False)]
    for ours in (from_gguf, from_json):
        wrong = [t for t, w in zip(SPLIT_TEXTS, want) if ours.encode(t) != w]
        assert not wrong, f"{pre}: {len(wrong)} of {len(SPLIT_TEXTS)} differ, e.g. {wrong[:3]!r}"
        for ids in want[:300]:
            assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
            assert ours.decode(ids, skip_special=True) == hf.decode(ids, skip_special_tokens=True)
    # The digit rule tells the two apart: "123" "45" (each then merged by BPE) or one by one.
    pieces = [from_gguf.decode([i]) for i in from_gguf.encode("12345")]
    ends = {sum(len(p) for p in pieces[:k + 1]) for k in range(len(pieces))}
    assert (3 in ends and max(map(len, pieces)) > 1) if pre == "llama-bpe" else pieces == list("12345")


def test_llama3_and_qwen2_to_json_round_trips(split_family):
    from tokenizers import Tokenizer as HFTokenizer

    pre, hf, from_gguf, _ = split_family
    text = from_gguf.to_json()
    again, theirs = Tokenizer.from_json(text), HFTokenizer.from_str(text)
    assert json.loads(text)["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == SPLIT_PATTERNS[pre]
    want = [e.ids for e in hf.encode_batch(SPLIT_TEXTS[:400], add_special_tokens=False)]
    assert [again.encode(t) for t in SPLIT_TEXTS[:400]] == want
    assert [e.ids for e in theirs.encode_batch(SPLIT_TEXTS[:400], add_special_tokens=False)] == want


def _train_sentencepiece(tmp_path, add_dummy_prefix: bool):
    """A SentencePiece BPE of 800 pieces with byte fallback trained here (one thread:
    deterministic) on the corpus, without normalization (as llama.cpp, which has none), and
    its GGUF metadata as llama.cpp's converter writes it."""
    import io

    import sentencepiece
    from llm_files import write_gguf

    lines = [line for text in CORPUS + _random_texts(300, seed=2) for line in text.split("\n") if line.strip()]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"), model_writer=model, model_type="bpe", vocab_size=800, byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=add_dummy_prefix,
        character_coverage=0.995, num_threads=1, allow_whitespace_only_pieces=True, minloglevel=2)
    sp = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    n = sp.vocab_size()
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else 6 if sp.is_byte(i)
             else 1 for i in range(n)]
    meta = {"general.architecture": "llama", "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": [sp.id_to_piece(i) for i in range(n)],
            "tokenizer.ggml.scores": [sp.get_score(i) for i in range(n)], "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.bos_token_id": sp.bos_id(), "tokenizer.ggml.eos_token_id": sp.eos_id(),
            "tokenizer.ggml.unknown_token_id": sp.unk_id(), "tokenizer.ggml.add_space_prefix": add_dummy_prefix,
            "tokenizer.ggml.add_bos_token": True}
    return sp, meta, write_gguf(tmp_path / "spm.gguf", meta)


@pytest.fixture(scope="module", params=[True, False], ids=["space_prefix", "no_space_prefix"])
def sentencepiece_family(request, tmp_path_factory):
    """(sentencepiece's processor, its GGUF metadata, kiln's tokenizer from the GGUF)."""
    sp, meta, path = _train_sentencepiece(tmp_path_factory.mktemp("spm"), request.param)
    return sp, meta, Tokenizer.from_gguf(str(path))


SPM_TEXTS = [t for t in CORPUS + _random_texts(2000, seed=29) + [" x", "  x  ", "\u2581 \u2581\u2581", "\U0001fae0 "]
             if not any(s in t for s in ("<s>", "</s>", "<unk>"))]


def test_sentencepiece_encode_and_decode_equal_sentencepiece(sentencepiece_family):
    sp, meta, ours = sentencepiece_family
    assert (ours.vocab_size, ours.bos_id, ours.eos_id) == (sp.vocab_size(), sp.bos_id(), sp.eos_id())
    assert ours.special_ids == [sp.unk_id(), sp.bos_id(), sp.eos_id()]
    wrong, decoded_wrong, fallback = [], [], 0
    for text in SPM_TEXTS:
        want = sp.encode(text, add_bos=True)  # the GGUF says add_bos_token; kiln's runner adds it
        got = [ours.bos_id] + ours.encode(text)
        fallback += any(meta["tokenizer.ggml.token_type"][i] == 6 for i in got)
        if got != want:
            wrong.append(text)
        if ours.decode(want, skip_special=True) != sp.decode(want) or ours.decode(want[1:]) != sp.decode(want[1:]):
            decoded_wrong.append(text)
    assert not wrong, f"{len(wrong)} of {len(SPM_TEXTS)} differ, e.g. {wrong[:3]!r}"
    assert not decoded_wrong, f"{len(decoded_wrong)} decode differently, e.g. {decoded_wrong[:3]!r}"
    assert fallback > 100  # the rare characters do fall back to byte tokens
    assert ours.decode(ours.encode(" x y")) == sp.decode(sp.encode(" x y")) == " x y"
    # Only the first text's space goes, so a BOS kept as text keeps it (as llama.cpp and `tokenizers` do).
    prefix = meta["tokenizer.ggml.add_space_prefix"]
    assert ours.decode([ours.bos_id] + ours.encode("x")) == ("<s> x" if prefix else "<s>x")


def test_sentencepiece_stream_decoder_adds_up_to_decode(sentencepiece_family):
    _, _, ours = sentencepiece_family
    rng = random.Random(8)
    for text in SPM_TEXTS[:200]:
        ids = ours.encode(text)
        for skip in (False, True):
            stream = StreamDecoder(ours, skip)
            assert "".join(stream.push(i) for i in ids) + stream.flush() == ours.decode(ids, skip_special=skip)
    for _ in range(200):
        ids = [rng.randrange(ours.vocab_size) for _ in range(rng.randint(1, 10))]
        stream = StreamDecoder(ours, True)
        assert "".join(stream.push(i) for i in ids) + stream.flush() == ours.decode(ids, skip_special=True), ids


def test_sentencepiece_to_json_is_the_hugging_face_form(sentencepiece_family):
    """to_json writes Hugging Face's Llama tokenizer.json (BPE with byte_fallback, merges derived
    from the scores as transformers' converter derives them); kiln and `tokenizers` both read
    it back as sentencepiece encodes and decodes."""
    from tokenizers import Tokenizer as HFTokenizer

    sp, meta, ours = sentencepiece_family
    doc = ours.to_json()
    model = json.loads(doc)["model"]
    assert model["byte_fallback"] is True and len(model["merges"]) > 300
    again, theirs = Tokenizer.from_json(doc), HFTokenizer.from_str(doc)
    assert again.special_ids == ours.special_ids and again.vocab_size == ours.vocab_size
    want = [sp.encode(text) for text in SPM_TEXTS]
    for tokenizer in (again, theirs):
        got = [e.ids for e in theirs.encode_batch(SPM_TEXTS, add_special_tokens=False)] if tokenizer is theirs \
            else [again.encode(text) for text in SPM_TEXTS]
        wrong = [text for text, g, w in zip(SPM_TEXTS, got, want) if g != w]
        assert not wrong, f"{type(tokenizer)}: {len(wrong)} of {len(SPM_TEXTS)} differ, e.g. {wrong[:3]!r}"
    for ids in want[:400]:
        assert again.decode(ids) == theirs.decode(ids) == sp.decode(ids)
    stream = StreamDecoder(again)
    assert "".join(stream.push(i) for i in want[5]) + stream.flush() == sp.decode(want[5])


def test_kiln_llm_export_keeps_a_sentencepiece_tokenizer(tmp_path):
    """A 1-layer Llama GGUF with the trained SentencePiece vocabulary exports (with add_bos), and
    the program's tokenizer (the tokenizer.json to_json wrote) encodes as sentencepiece does.
    (Llama 3 / Qwen2 take the same to_json path: test_llama3_and_qwen2_to_json_round_trips.)"""
    from llm_files import tiny_llama, write_gguf

    import kiln.llm

    sp, tokenizer_meta, _ = _train_sentencepiece(tmp_path, True)
    meta, tensors = tiny_llama(vocab=tokenizer_meta["tokenizer.ggml.tokens"])
    meta.update({k: v for k, v in tokenizer_meta.items() if k != "general.architecture"})
    del meta["tokenizer.ggml.merges"]
    out = tmp_path / "small.kiln"
    report = kiln.llm.export_gguf(write_gguf(tmp_path / "small.gguf", meta, tensors), out, dtype="float32", context=8,
                                  max_tokens_per_call=4)
    assert report.config["add_bos"] is True and report.config["bos_id"] == sp.bos_id()
    runner = kiln.llm.Runner(out)
    for text in SPM_TEXTS[:300]:
        assert runner.tokenizer.encode(text) == sp.encode(text), text


def _spm_gguf(tmp_path, tokens, scores=None, types=None, **extra):
    from llm_files import write_gguf

    meta = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": scores if scores is not None else [0.0] * len(tokens),
            "tokenizer.ggml.token_type": types if types is not None else [1] * len(tokens), **extra}
    return str(write_gguf(tmp_path / "spm.gguf", meta))


def test_sentencepiece_merges_the_best_score_first_and_the_leftmost_on_ties(tmp_path):
    tokens = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "c", "ab", "bc", "\u2581a", "\u2581ab", "<0x64>"]
    types = [2, 3, 3] + [1] * 8 + [6]
    ties = Tokenizer.from_gguf(_spm_gguf(tmp_path, tokens, [0.0] * 12, types))
    assert [ties.id_to_token(i) for i in ties.encode("abc", parse_special=False)] == ["\u2581ab", "c"]
    # bc above everything else: it goes first, then nothing joins "\u2581a" and "bc".
    scores = [0.0] * 12
    scores[tokens.index("bc")] = 5.0
    best = Tokenizer.from_gguf(_spm_gguf(tmp_path, tokens, scores, types, **{"tokenizer.ggml.add_space_prefix": False}))
    assert [best.id_to_token(i) for i in best.encode("abc")] == ["a", "bc"]
    assert best.encode("dab") == [11, 7]  # "d" is no token: its byte token
    assert best.decode(best.encode(" abc")) == " abc" and ties.decode(ties.encode(" abc")) == " abc"
    assert best.encode("x") == [0]  # no byte token for "x": the unknown token


def test_sentencepiece_to_json_keeps_every_token_type(tmp_path):
    """Every token decodes the same after to_json -> from_json (what fuzz_gguf checks too),
    each type as llama.cpp decodes it, except unused tokens, which decode as normal ones."""
    tokens = ["<unk>", "<s>", "</s>", "\u2581", "a", "\u2581a", "<0x41>", "<0x42>", "<unused0>", "<user>", "x\u2581"]
    types = [2, 3, 3, 1, 1, 1, 6, 1, 5, 4, 0]
    ours = Tokenizer.from_gguf(_spm_gguf(tmp_path, tokens, [float(-i) for i in range(11)], types))
    again = Tokenizer.from_json(ours.to_json())
    assert [ours.token_bytes(i) for i in range(11)] == [
        b"<unk>", b"<s>", b"</s>", b" ", b"a", b" a", b"A", b"B", b"<unused0>", b"<user>", b"x "]
    assert [again.token_bytes(i) for i in range(11)] == [ours.token_bytes(i) for i in range(11)]
    assert again.special_ids == ours.special_ids == [0, 1, 2]
    assert ours.encode("<user>a a<s>") == again.encode("<user>a a<s>") == [9, 5, 5, 1]


@pytest.mark.parametrize("change, message", [
    ({"tokenizer.ggml.scores": [0.0] * 3}, "tokenizer.ggml.scores is not a list of 5 numbers, one per token"),
    ({"tokenizer.ggml.scores": ["x"] * 5}, "tokenizer.ggml.scores is not a list of 5 numbers"),
    ({"tokenizer.ggml.token_type": [1, 1, 1, 1, 7]}, "token_type of token 4 is 7, not a type 0..6"),
    ({"tokenizer.ggml.token_type": [1, 1, 1, -1, 1]}, "token_type of token 3 is -1, not a type 0..6"),
    ({"tokenizer.ggml.token_type": [1, 1, 1, 1, 6]}, "token 4 is of type byte but is 'b', not <0xXX>"),
    ({"tokenizer.ggml.tokens": ["<unk>", "a", "<0xG1>", "<0x1>", "<0x41"],
      "tokenizer.ggml.token_type": [2, 1, 6, 1, 1]}, "token 2 is of type byte but is '<0xG1>'"),
    ({"tokenizer.ggml.add_space_prefix": "yes"}, "tokenizer.ggml.add_space_prefix is not a bool"),
])
def test_bad_sentencepiece_gguf_is_a_clear_error(tmp_path, change, message):
    from llm_files import write_gguf

    meta = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["<unk>", "a", "ab", "\u2581", "b"],
            "tokenizer.ggml.scores": [0.0] * 5, "tokenizer.ggml.token_type": [2, 1, 1, 1, 1], **change}
    path = write_gguf(tmp_path / "bad.gguf", meta)
    with pytest.raises(kiln.InvalidProgram, match=message.replace("(", r"\(").replace(")", r"\)")):
        Tokenizer.from_gguf(str(path))


def _minimal(**changes) -> str:
    doc = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}, "decoder": {"type": "ByteLevel"},
           "added_tokens": [], "normalizer": None}
    doc.update(changes)
    return json.dumps(doc)


def _spm_json(**changes) -> str:
    doc = json.loads(_minimal())
    doc["model"].update({"byte_fallback": True, "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "\u2581a": 3, "<0x62>": 4},
                         "merges": [["\u2581", "a"]], "unk_token": "<unk>", "fuse_unk": True})
    space = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    doc.update({"pre_tokenizer": None, "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"}, space]},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}})
    doc.update(changes)
    return json.dumps(doc)


def test_minimal_sentencepiece_tokenizer_json():
    from tokenizers import Tokenizer as HFTokenizer

    ours, theirs = Tokenizer.from_json(_spm_json()), HFTokenizer.from_str(_spm_json())
    for text in ["a a", " ab", "bxxa", "xb", "", "aa  b", "xxbxa"]:  # x has no token, b only a byte token
        assert ours.encode(text) == theirs.encode(text).ids, text
        assert ours.decode(ours.encode(text)) == theirs.decode(theirs.encode(text).ids), text


def test_minimal_tokenizer_json():
    t = Tokenizer.from_json(_minimal())
    assert t.encode("abab") == [2, 2] and t.decode([2, 0]) == "aba"


@pytest.mark.parametrize("text, error, message", [
    ("{", kiln.InvalidArgument, "tokenizer.json: expected a key at byte 1"),
    ("[" * 100000, kiln.InvalidArgument, "nesting too deep"),
    ('{"model": {"type": "BPE", "vocab": {"a": "x"}}}', kiln.InvalidArgument, "vocab entry 'a' has no integer id"),
    ('{"model": {"type": "BPE", "vocab": {"a": 4000000000}}}', kiln.InvalidArgument, "has id 4000000000, out of range"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a q"]}, "pre_tokenizer": {"type": "ByteLevel"}}',
     kiln.InvalidArgument, "merge 0 ('a' 'q') names a token missing"),
    ('{"model": {"type": "Unigram", "vocab": []}}', kiln.NotSupported, "model type 'Unigram' is not supported"),
    (_minimal(normalizer={"type": "NFC"}), kiln.NotSupported, "a normalizer is not supported"),
    (_minimal(pre_tokenizer={"type": "Metaspace"}), kiln.NotSupported, "pre_tokenizer 'Metaspace' is not supported"),
    (_minimal(pre_tokenizer={"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": False}),
     kiln.NotSupported, "Split pattern .+ is not supported (kiln reads the patterns of GPT-2's ByteLevel"),
    (_minimal(pre_tokenizer={"type": "Split", "pattern": {"Regex": SPLIT_PATTERNS["qwen2"]}, "behavior": "Removed"}),
     kiln.NotSupported, "only Split with behavior Isolated"),
    (_minimal(pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"}),
     kiln.NotSupported, "Split pre_tokenizer without a Regex pattern"),
    (_minimal(decoder={"type": "WordPiece"}), kiln.NotSupported, "decoder 'WordPiece' is not supported"),
    (_minimal(added_tokens=[{"id": 3, "content": "<x>", "lstrip": True}]), kiln.NotSupported, "has lstrip"),
    ('{"a": "\\ud800"}', kiln.InvalidArgument, "unpaired surrogate"),
    (_spm_json(normalizer={"type": "NFKC"}), kiln.NotSupported, "this normalizer is not supported with byte_fallback"),
    (_spm_json(pre_tokenizer={"type": "Metaspace"}), kiln.NotSupported, "a pre_tokenizer is not supported with byte"),
    (_spm_json(decoder={"type": "Metaspace"}), kiln.NotSupported, "this decoder is not supported with byte_fallback"),
])
def test_bad_tokenizer_json_is_a_clear_error(text, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        Tokenizer.from_json(text)


def test_missing_tokenizer_file():
    with pytest.raises(kiln.errors.NotFound, match="cannot open '/nonexistent/tokenizer.json'"):
        Tokenizer.from_json_file("/nonexistent/tokenizer.json")
