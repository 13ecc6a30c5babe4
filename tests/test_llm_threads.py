"""kiln.llm.Runner shared by threads and streams (docs/threads-and-files.md): calls take
turns, a superseded stream ends with kiln.Superseded and never yields another
generation's text, closing a stale stream never cancels a newer one, cancel() works
from another thread; and a stress run of one Runner and one Method shared by 8
threads, every answer compared with the one computed alone.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

import kiln
from kiln.llm import Runner

from conftest import full_tier

PROMPTS = ["The sea", "Once upon a time", "Hello 日本", "A cat", "Numbers: 1 2 3", "Why is the sky"]


@pytest.fixture(scope="module")
def tiny(llm_programs):
    return llm_programs("tiny")


def test_two_streams_in_one_thread_do_not_cross_talk(tiny):
    runner = Runner(tiny)
    want_b = runner.generate("Once upon a time", max_new_tokens=8, temperature=0)
    first = runner.stream("The sea", max_new_tokens=8, temperature=0, ignore_eos=True)
    next(first)
    second = runner.stream("Once upon a time", max_new_tokens=8, temperature=0)
    with pytest.raises(kiln.Superseded, match="another generation began on its Runner"):
        next(first)
    assert list(first) == []  # ended: it yields nothing more, in particular not the second's text
    first.close()             # stale: must not cancel the second
    assert "".join(second) == want_b
    assert second.stats.finish_reason != "cancelled" and second.tokens == runner.generated_tokens


def test_closing_a_stale_stream_leaves_the_new_generation_alone(tiny):
    runner = Runner(tiny)
    want = runner.generate("A cat", max_new_tokens=6, temperature=0, ignore_eos=True)
    stale = runner.stream("The sea", max_new_tokens=6, temperature=0)
    fresh = runner.stream("A cat", max_new_tokens=6, temperature=0, ignore_eos=True)
    got = next(fresh)
    stale.close()
    del stale
    assert got + "".join(fresh) == want and fresh.stats.finish_reason == "max_new_tokens"


def test_cancel_from_another_thread(tiny):
    runner = Runner(tiny)
    stream = runner.stream("The sea", max_new_tokens=40, temperature=0, ignore_eos=True)
    text = next(stream)
    canceller = threading.Thread(target=runner.cancel)
    canceller.start()
    canceller.join()
    text += "".join(stream)
    assert stream.stats.finish_reason == "cancelled" and len(stream.tokens) < 40
    assert runner.stats.finish_reason == "cancelled"  # this thread's last generation
    # The next generation is not affected by the cancellation before it.
    assert runner.generate("The sea", max_new_tokens=5, temperature=0) is not None
    assert runner.stats.finish_reason == "max_new_tokens"


def test_reset_ends_a_suspended_stream(tiny):
    runner = Runner(tiny)
    stream = runner.stream("The sea", max_new_tokens=20, temperature=0, ignore_eos=True)
    next(stream)
    runner.reset()
    rest = list(stream)
    assert stream.stats.finish_reason == "cancelled" and len(rest) <= 1


def test_stats_are_the_calling_threads_own(tiny):
    runner = Runner(tiny)
    runner.generate("The sea", max_new_tokens=3, temperature=0)
    mine = runner.generated_tokens
    other = threading.Thread(target=lambda: runner.generate("Once upon a time", max_new_tokens=7, temperature=0,
                                                            ignore_eos=True))
    other.start()
    other.join()
    assert runner.generated_tokens == mine and runner.stats.generated_tokens == 3


def _reference(tiny, jobs):
    alone = Runner(tiny)
    out = {}
    for prompt, seed in jobs:
        alone.reset()
        text = alone.generate(prompt, **_options(seed))
        out[prompt, seed] = (text, alone.generated_tokens)
    return out


def _options(seed):
    # seed -1 stands for greedy; others sample.
    if seed < 0:
        return dict(max_new_tokens=3, temperature=0, ignore_eos=True)
    return dict(max_new_tokens=3, temperature=2.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed, ignore_eos=True)


def test_one_runner_and_one_method_shared_by_8_threads(request, tiny, exported):
    """2,000 calls (400 outside the full tier) from 8 threads on one Runner and one Method: generate, stream (some
    left early), cancel, reset and method calls at random. Every generation that was
    not cancelled equals the same prompt and seed run alone; a cancelled or
    superseded one is a prefix of it; every method result equals its input's alone."""
    jobs = [(p, s) for p in PROMPTS for s in (-1, 5, 6)]
    want = _reference(tiny, jobs)
    assert len({tuple(v[1]) for v in want.values()}) > len(jobs) // 2  # answers differ: a mix-up would show

    path, *_ = exported("mlp")
    method = kiln.load(path).method("forward")
    shape = method.input_specs[0].shape
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]
    method_want = [method(x)[0].copy() for x in inputs]

    runner = Runner(tiny)
    failures, counts = [], {}
    lock = threading.Lock()

    def fail(what):
        with lock:
            failures.append(what)

    def worker(seed: int, calls: int):
        r = random.Random(seed)
        for _ in range(calls):
            op = r.choices(["method", "generate", "stream", "cancel", "reset"], [40, 30, 20, 5, 5])[0]
            with lock:
                counts[op] = counts.get(op, 0) + 1
            if op == "method":
                i = r.randrange(len(inputs))
                got = method(inputs[i])[0]
                if not np.array_equal(got, method_want[i]):
                    fail(f"method input {i}: another result")
            elif op == "cancel":
                runner.cancel()
            elif op == "reset":
                runner.reset()
            else:
                job = r.choice(jobs)
                text, tokens = want[job]
                if op == "generate":
                    got = runner.generate(job[0], **_options(job[1]))
                    got_tokens, reason = runner.generated_tokens, runner.stats.finish_reason
                else:
                    stream = runner.stream(job[0], **_options(job[1]))
                    pieces, leave = [], r.random() < 0.3
                    try:
                        for piece in stream:
                            pieces.append(piece)
                            if leave:
                                break
                    except kiln.Superseded:
                        pass
                    stream.close()
                    got = "".join(pieces)
                    got_tokens = stream.tokens if stream.tokens is not None else []
                    reason = stream.stats.finish_reason if stream.stats else "superseded"
                    if reason not in ("cancelled", "superseded", "max_new_tokens"):
                        fail(f"stream {job}: finish reason {reason!r}")
                    if reason == "superseded" or leave:
                        if not text.startswith(got):
                            fail(f"stream {job}: {got!r} is not a prefix of {text!r}")
                        continue
                if reason == "cancelled":
                    if tokens[:len(got_tokens)] != got_tokens or not text.startswith(got):
                        fail(f"{op} {job}: cancelled {got_tokens} is not a prefix of {tokens}")
                elif (got, got_tokens) != (text, tokens):
                    fail(f"{op} {job}: got {got!r} {got_tokens}, alone {text!r} {tokens}")

    calls = 2000 if full_tier(request.config) else 400
    threads = [threading.Thread(target=worker, args=(i, calls // 8)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts.values()) == calls and min(counts.values()) > 0, counts
    assert failures == [], failures[:10]


def test_out_of_range_and_undecodable_arguments_are_invalid_argument(tiny):
    runner = Runner(tiny)
    for options, field in [(dict(max_new_tokens=2**40), "max_new_tokens"), (dict(top_k=2**31), "top_k"),
                           (dict(seed=2**64), "seed"), (dict(seed=-2), "seed"),
                           (dict(stop_tokens=[2**33]), r"stop_tokens\[0\]"), (dict(stop=["\udc80"]), r"stop\[0\]"),
                           (dict(temperature="hot"), "temperature"), (dict(ignore_eos="yes"), "ignore_eos")]:
        with pytest.raises(kiln.InvalidArgument, match=field):
            runner.generate("Hi", **options)
        with pytest.raises(kiln.InvalidArgument, match=field):
            runner.stream("Hi", **options)
    with pytest.raises(kiln.InvalidArgument, match=r"prompt\[1\] must be an integer from"):
        runner.generate([5, 2**40])
    with pytest.raises(kiln.InvalidArgument, match="prompt is not valid Unicode text: a lone surrogate at character 3"):
        runner.generate("abc\udcff")
    with pytest.raises(kiln.InvalidArgument, match=r"messages\[0\] content is not valid Unicode"):
        runner.chat([("user", "\ud800")])
    tokenizer = runner.tokenizer
    with pytest.raises(kiln.InvalidArgument, match=r"ids\[0\] must be an integer"):
        tokenizer.decode([2**31])
    with pytest.raises(kiln.InvalidArgument, match="text is not valid Unicode"):
        tokenizer.encode("\udc80")
    with pytest.raises(kiln.InvalidArgument, match="id must be an integer"):
        tokenizer.id_to_token(2**63)
    with pytest.raises(kiln.InvalidArgument, match="max_memory_bytes must be an int"):
        Runner(tiny, max_memory_bytes=-1)
    with pytest.raises(kiln.InvalidArgument, match="num_threads"):
        Runner(tiny, num_threads=2**40)
    with pytest.raises(kiln.InvalidArgument, match="path must be a path"):
        Runner(str(tiny) + "\0")
    assert runner.generate("Hi", max_new_tokens=2, temperature=0) is not None  # still usable
