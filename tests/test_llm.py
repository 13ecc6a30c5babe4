"""kiln.llm end to end: `kiln llm export` of SmolLM2's GGUF, then generation from the
.kiln file alone (docs/llm.md).

  * greedy generation of 32 tokens equals eager PyTorch token for token (float32
    program; the eager model is built from weights read by the independent
    `gguf` package), with a prompt longer than one prefill chunk;
  * kiln's GGUF reading gives exactly those weights;
  * the program carries tokenizer, chat template and config as metadata;
  * sampling is reproducible by seed, streaming adds up to generate(), stop
    strings/tokens, max_new_tokens, the end of the context and cancellation end
    generation as documented; a kept KV cache prefix gives what a fresh cache gives;
  * bad input is a clear error: an empty prompt, a prompt longer than the
    context, a program without LLM metadata or without a tokenizer;
  * the command line: kiln generate (streamed text, --stats), kiln chat.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kiln
from kiln.llm import Runner

from conftest import clean_env

QUESTION = "Write a short poem about the sea, with rhymes."


@pytest.fixture(scope="module")
def smollm2(llm_programs):
    return llm_programs("smollm2")


@pytest.fixture(scope="module")
def tiny(llm_programs):
    return llm_programs("tiny")


@pytest.fixture(scope="module")
def eager():
    from zoo import smollm2

    return smollm2.load_smollm2(capacity=256), smollm2.load_tokenizer()


def test_greedy_32_tokens_equal_eager(eager, smollm2):
    from zoo import smollm2 as zoo

    model, bpe = eager
    prompt = bpe.chat_prompt(QUESTION)
    zoo.reset_cache(model)
    want = zoo.greedy_generate(model, prompt, 32)
    assert len(want) == 32 and not {0, 2} & set(want)  # no stop token: all 32 are compared

    runner = Runner(smollm2)
    assert len(prompt) > runner.config["max_tokens_per_call"] == 16  # the prefill runs in chunks
    text = runner.generate(prompt, max_new_tokens=32, temperature=0)
    assert runner.generated_tokens == want, (bpe.decode(runner.generated_tokens), bpe.decode(want))
    assert text == bpe.decode(want)
    stats = runner.stats
    assert (stats.prompt_tokens, stats.generated_tokens, stats.finish_reason) == (len(prompt), 32, "max_new_tokens")
    assert stats.prefill_tokens_per_s > 0 and stats.decode_tokens_per_s > 0 and stats.time_to_first_token_ms > 0


def test_chat_answers_with_the_template(smollm2):
    runner = Runner(smollm2)
    assert runner.chat_template.format == "chatml"
    assert "SmolLM" in runner.chat_template.default_system
    answer = runner.chat([{"role": "user", "content": "What is the capital of France?"}], temperature=0)
    assert "Paris" in answer and "<|im_end|>" not in answer
    assert runner.stats.finish_reason == "stop_token"
    stopped_at = runner.stats.generated_tokens
    # ignore_eos: the end-of-turn token no longer ends it (benchmarks); the stop string still applies to chat.
    runner.generate(runner._native.chat_prompt([("user", "What is the capital of France?")]), temperature=0,
                    max_new_tokens=stopped_at + 4, ignore_eos=True)
    assert runner.stats.generated_tokens == stopped_at + 4 and runner.stats.finish_reason == "max_new_tokens"
    assert runner.generated_tokens[stopped_at] == 2  # <|im_end|> was generated, and passed


def test_kiln_reads_the_weights_the_gguf_package_reads():
    import torch

    from kiln.llm.export import config_from_gguf, state_from_gguf
    from kiln.llm.gguf import GgufFile

    from zoo import smollm2 as zoo

    cfg, want, _ = zoo._load()
    g = GgufFile(zoo.gguf_path())
    assert config_from_gguf(g) == cfg
    got = state_from_gguf(g, cfg)
    assert got.keys() == want.keys()
    for name in want:
        assert torch.equal(got[name], want[name]), name


def test_the_program_carries_tokenizer_template_and_config(smollm2):
    from zoo import smollm2 as zoo

    program = kiln.load(smollm2)
    assert program.metadata_keys == ["kiln.llm.config", "kiln.llm.tokenizer", "kiln.llm.chat_template"]
    config = json.loads(program.metadata("kiln.llm.config"))
    assert config["architecture"] == "llama" and config["vocab_size"] == 49152 and config["n_layers"] == 30
    assert (config["context_length"], config["max_tokens_per_call"], config["weights"]) == (256, 16, "float32")
    assert config["stop_ids"] == [0, 2] and config["add_bos"] is False
    vocab = zoo._load(weights=False)[2]
    assert program.metadata("kiln.llm.chat_template").decode() == vocab["chat_template"]
    tokenizer = kiln.llm.Tokenizer.from_json(program.metadata("kiln.llm.tokenizer").decode())
    assert tokenizer.encode("Hello 123 <|im_end|>") == zoo.load_tokenizer().encode("Hello 123 <|im_end|>")
    spec = program.method_spec("forward")
    assert [s.name for s in spec.input_specs] == ["tokens", "input_pos", "slots", "cache_positions"]
    assert spec.output_specs[0].shape == (1, 1, 49152)  # the last token's logits only
    with pytest.raises(kiln.errors.NotFound, match="no metadata 'nope'"):
        program.metadata("nope")


def test_sampling_is_reproducible_by_seed(tiny):
    runner = Runner(tiny)
    options = dict(max_new_tokens=12, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    a = runner.generate("Once upon a time", seed=7, **options)
    ids_a = runner.generated_tokens
    b = runner.generate("Once upon a time", seed=7, **options)
    assert (a, ids_a) == (b, runner.generated_tokens)
    others = set()
    for seed in range(8, 12):
        runner.generate("Once upon a time", seed=seed, **options)
        others.add(tuple(runner.generated_tokens))
    assert len(others | {tuple(ids_a)}) > 1  # other seeds, other samples


def test_top_k_1_is_greedy(tiny):
    runner = Runner(tiny)
    greedy = runner.generate("The sea", max_new_tokens=10, temperature=0)
    ids = runner.generated_tokens
    assert runner.generate("The sea", max_new_tokens=10, temperature=1.5, top_k=1, seed=3) == greedy
    assert runner.generated_tokens == ids


def test_stream_adds_up_to_generate(tiny):
    runner = Runner(tiny)
    text = runner.generate("Hello 日本", max_new_tokens=20, temperature=0)
    pieces = list(runner.stream("Hello 日本", max_new_tokens=20, temperature=0))
    assert "".join(pieces) == text and len(pieces) > 1
    assert all("\ufffd" not in p for p in pieces) or "\ufffd" in text


def test_the_stats_split_the_load_into_its_parts(tiny):
    s = Runner(tiny).stats
    parts = (s.load_program_ms, s.load_metadata_ms, s.load_method_ms)
    assert all(p > 0 for p in parts) and sum(parts) <= s.load_ms, s


def test_max_new_tokens_and_stop_strings(tiny):
    runner = Runner(tiny)
    full = runner.generate("The sea", max_new_tokens=16, temperature=0)
    assert runner.stats.generated_tokens == 16 and runner.stats.finish_reason == "max_new_tokens"
    stop = full.strip()[3:6]
    assert stop and stop in full
    cut = runner.generate("The sea", max_new_tokens=16, temperature=0, stop=[stop])
    assert cut == full[:full.index(stop)] and runner.stats.finish_reason == "stop_string"
    # A stop token ends generation before it is emitted.
    runner.generate("The sea", max_new_tokens=16, temperature=0)
    ids = runner.generated_tokens
    runner.generate("The sea", max_new_tokens=16, temperature=0, stop_tokens=[ids[2]])
    assert runner.generated_tokens == ids[:ids.index(ids[2])] and runner.stats.finish_reason == "stop_token"


def test_generation_stops_at_the_end_of_the_context(tiny):
    runner = Runner(tiny)
    context = runner.config["context_length"]
    prompt = list(range(100, 100 + context - 4))
    runner.generate(prompt, max_new_tokens=50, temperature=0)
    assert runner.stats.finish_reason == "context_full"
    assert len(prompt) + runner.stats.generated_tokens <= context + 1


def test_leaving_the_stream_cancels(tiny):
    runner = Runner(tiny)
    stream = runner.stream("Tell me", max_new_tokens=40, temperature=0)
    got = []
    for piece in stream:
        got.append(piece)
        if len(got) == 3:
            break
    stream.close()
    assert runner.stats.finish_reason == "cancelled" and runner.stats.generated_tokens < 40
    # The runner is usable afterwards.
    assert runner.generate("Tell me", max_new_tokens=4, temperature=0)


def test_kept_cache_prefix_gives_what_a_fresh_cache_gives(tiny):
    runner = Runner(tiny)
    first = runner.tokenizer.encode("The weather today is")
    runner.generate(first, max_new_tokens=5, temperature=0)
    longer = first + runner.generated_tokens + runner.tokenizer.encode(" and tomorrow")
    text = runner.generate(longer, max_new_tokens=8, temperature=0)
    assert runner.stats.reused_tokens == len(first) + 4  # the prompt and the generated tokens that were fed back
    fresh = Runner(tiny)
    assert fresh.generate(longer, max_new_tokens=8, temperature=0) == text
    assert fresh.stats.reused_tokens == 0
    runner.reset()
    assert runner.generate(longer, max_new_tokens=8, temperature=0) == text and runner.stats.reused_tokens == 0


def test_empty_prompt_is_an_error(tiny):
    runner = Runner(tiny)
    with pytest.raises(kiln.InvalidArgument, match="the prompt is empty"):
        runner.generate("")
    with pytest.raises(kiln.InvalidArgument, match="the prompt is empty"):
        runner.generate([])


def test_prompt_longer_than_the_context_is_an_error(tiny):
    runner = Runner(tiny)
    with pytest.raises(kiln.InvalidArgument, match="the prompt is 200 tokens but the model's context holds 64"):
        runner.generate(list(range(1000, 1200)))
    with pytest.raises(kiln.InvalidArgument, match="but the model's context holds 64"):
        runner.generate("word " * 100)
    assert runner.generate("word", max_new_tokens=2, temperature=0) is not None  # still usable


@pytest.mark.parametrize("option, value, message", [
    ("temperature", -1.0, "temperature must be a finite number >= 0"),
    ("top_p", 0.0, "top_p must be in \\(0, 1\\]"),
    ("max_new_tokens", 0, "max_new_tokens must be at least 1"),
    ("repetition_penalty", float("nan"), "repetition_penalty must be a finite number > 0"),
])
def test_bad_sampling_options_are_errors(tiny, option, value, message):
    with pytest.raises(kiln.InvalidArgument, match=message):
        Runner(tiny).generate("Hi", **{option: value})


def test_out_of_vocabulary_prompt_ids_are_errors(tiny):
    with pytest.raises(kiln.InvalidArgument, match="prompt token 49152 is outside the vocabulary of 49152"):
        Runner(tiny).generate([5, 49152])


def test_a_program_without_llm_metadata_is_refused(exported):
    path, *_ = exported("cnn")
    with pytest.raises(kiln.InvalidProgram, match="it is not an LLM program: there is no 'kiln.llm.config' metadata"):
        Runner(path)


def test_a_program_without_a_tokenizer_is_refused(tiny, tmp_path):
    import torch

    from kiln.export import export

    config = kiln.load(tiny).metadata("kiln.llm.config")
    path = tmp_path / "no_tokenizer.kiln"
    export(torch.nn.Linear(4, 4), (torch.zeros(1, 4),), path, metadata={"kiln.llm.config": config})
    with pytest.raises(kiln.InvalidProgram, match="there is no 'kiln.llm.tokenizer' metadata"):
        Runner(path)


def test_a_program_whose_method_is_not_an_llm_is_refused(tiny, tmp_path):
    import torch

    from kiln.export import export

    program = kiln.load(tiny)
    path = tmp_path / "linear.kiln"
    export(torch.nn.Linear(4, 4), (torch.zeros(1, 4),), path,
           metadata={k: program.metadata(k) for k in program.metadata_keys})
    with pytest.raises(kiln.InvalidProgram, match="does not have the LLM signature"):
        Runner(path)


def _kiln(*args, stdin: str | None = None, **env):
    return subprocess.run([sys.executable, "-m", "kiln", *map(str, args)], input=stdin, capture_output=True,
                          text=True, env=clean_env(**env), timeout=600)


def test_cli_generate_streams_the_text_and_prints_stats(tiny):
    want = Runner(tiny).generate("The sea", max_new_tokens=12, temperature=0)
    proc = _kiln("generate", tiny, "--prompt", "The sea", "--max-new-tokens", 12, "--temperature", 0, "--stats",
                 KILN_NUM_THREADS="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == want + "\n"
    assert "The sea" not in proc.stdout[:7]  # the prompt is not echoed
    for line in ("prefill ", "decode "):
        assert any(l.startswith(line) and l.endswith(" tok/s") or (l.startswith(line) and " tok/s (" in l)
                   for l in proc.stderr.splitlines()), proc.stderr


def test_cli_errors_are_clear(tiny, tmp_path):
    proc = _kiln("generate", tiny, "--prompt", "")
    assert proc.returncode == 1 and "InvalidArgument: the prompt is empty" in proc.stderr, proc.stderr
    proc = _kiln("generate", tmp_path / "missing.kiln", "--prompt", "x")
    assert proc.returncode == 1 and "missing.kiln" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_chat_keeps_the_conversation(tiny):
    proc = _kiln("chat", tiny, "--temperature", "0", "--max-new-tokens", "6", "--stats",
                 stdin="Hello there\nAnd again\n/exit\n")
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 2
    reused = [l for l in proc.stderr.splitlines() if l.startswith("prompt ")]
    # The second turn reuses the first.
    assert len(reused) == 2 and "(0 reused" in reused[0] and "(0 reused" not in reused[1]


def test_default_weights_keep_the_gguf_bits_or_say_why_not(tmp_path):
    """Without --dtype/--quantize: the GGUF's own Q4_1/Q8_0 blocks when kiln has its quantized
    operators (kiln.export.quantize), their linears with int8 activations unless compute="float32"
    says otherwise; else float32 with a note saying so."""
    import importlib.util

    from kiln.llm.export import export_gguf

    from zoo import smollm2 as zoo

    path = tmp_path / "default.kiln"
    report = export_gguf(zoo.gguf_path(), path, context=32, max_tokens_per_call=4, n_layers=1)
    config = json.loads(kiln.load(path).metadata("kiln.llm.config"))
    if importlib.util.find_spec("kiln.export.quantize") is None:
        assert config["weights"] == report.weights == "float32"
        assert any("Q4_1/Q8_0 weights were dequantized to float32" in n and "kiln.export.quantize" in n
                   for n in report.notes), report.notes
    else:
        assert config["weights"] == report.weights == "gguf Q4_1/Q8_0, int8 activations" and not report.notes
        assert "linear q4_1/32 int8:" in str(report) and "linear q8_0/32 int8:" in str(report), str(report)
        ops = {i.op for i in kiln.load(path).method("forward").instructions}
        assert any(op.startswith("kiln_quantized::") for op in ops), ops
        float_path = tmp_path / "float.kiln"
        report = export_gguf(zoo.gguf_path(), float_path, context=32, max_tokens_per_call=4, n_layers=1,
                             compute="float32")
        assert report.weights == "gguf Q4_1/Q8_0" and " int8:" not in str(report), str(report)
        assert Runner(float_path).generate("Hi", max_new_tokens=3, temperature=0) is not None
    assert Runner(path).generate("Hi", max_new_tokens=3, temperature=0) is not None
