"""kiln.llm.BatchRunner (docs/llm.md, "Batched generation"): requests decoded together in one
forward call per step get what each gets alone (greedy: the same tokens; sampled: the same
seed, the same text), prefix reuse from a free slot, cancellation, token masks, logprobs,
queueing beyond the slots, and the errors of bad requests.
"""

from __future__ import annotations

import math
import random
import threading

import pytest

import kiln
from kiln.llm import BatchRunner, Runner

from conftest import TINY_SLOTS

PROMPTS = ["The sea", "Once upon a time", "Hello 日本", "A cat", "Numbers: 1 2 3", "Why is the sky",
           "def main():", "Paris is"]


@pytest.fixture(scope="module")
def program(llm_programs):
    """The 2-layer SmolLM2 program with 8 slots and the GGUF's own 4-bit blocks (what kiln llm
    export writes by default); the greedy test runs the float32 one too."""
    return llm_programs("tiny_gguf")


def collect(out: dict, events) -> dict:
    """Adds `events` to out: {request: (tokens, text, final event or None)}."""
    for e in events:
        tokens, text, _ = out.get(e.request, ([], "", None))
        if e.token >= 0:
            tokens = tokens + [e.token]
        out[e.request] = (tokens, text + e.text, e if e.finished else None)
    return out


def run_all(batch: BatchRunner, out: dict | None = None, max_steps: int = 10_000) -> dict:
    """Steps until no work is left; collect()'s dict of every event (those in `out` before too)."""
    out = {} if out is None else out
    for _ in range(max_steps):
        if not batch.has_work:
            return out
        collect(out, batch.step())
    raise AssertionError("the batch did not finish")


_runners: dict = {}


def alone(path, prompt, **options):
    """What Runner.generate gives `prompt` from an empty cache (one Runner per program)."""
    runner = _runners.setdefault(str(path), Runner(path))
    runner.reset()
    text = runner.generate(prompt, **options)
    return list(runner.generated_tokens), text, runner.stats


@pytest.mark.parametrize("name", ["tiny", "tiny_gguf"])
def test_greedy_batch_of_8_equals_each_request_alone(llm_programs, name):
    program = llm_programs(name)
    options = dict(max_new_tokens=24, temperature=0, ignore_eos=True)
    want = [alone(program, p, **options) for p in PROMPTS]
    batch = BatchRunner(program)
    assert batch.slots == TINY_SLOTS == len(PROMPTS)
    ids = [batch.submit(p, **options) for p in PROMPTS]
    got = run_all(batch)
    for rid, prompt, (tokens, text, stats) in zip(ids, PROMPTS, want):
        g_tokens, g_text, final = got[rid]
        assert g_tokens == tokens, prompt
        assert g_text == text, prompt
        assert final.finish_reason == "max_new_tokens" == stats.finish_reason
        assert final.stats["generated_tokens"] == 24 and final.stats["prompt_tokens"] == stats.prompt_tokens
    assert batch.active == 0 and batch.queued == 0


def test_a_seed_gives_the_same_text_whatever_else_runs(program):
    sampled = dict(max_new_tokens=16, temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=1234, ignore_eos=True)
    want = alone(program, "Once upon a time", **sampled)
    batch = BatchRunner(program)
    others = [batch.submit(p, max_new_tokens=random.Random(i).randint(3, 20), temperature=1.0, seed=i)
              for i, p in enumerate(PROMPTS[:5])]
    rid = batch.submit("Once upon a time", **sampled)
    got = run_all(batch)
    assert got[rid][0] == want[0] and got[rid][1] == want[1]
    assert all(got[o][2] is not None for o in others)


def test_more_requests_than_slots_queue_and_all_finish(program):
    batch = BatchRunner(program, slots=3)
    assert batch.slots == 3
    prompts = PROMPTS * 2
    ids = [batch.submit(p, max_new_tokens=5, temperature=0, ignore_eos=True) for p in prompts]
    assert batch.queued == len(prompts)
    got = collect({}, batch.step())
    assert batch.active == 3 and batch.queued == len(prompts) - 3
    got = run_all(batch, got)
    want = {p: alone(program, p, max_new_tokens=5, temperature=0, ignore_eos=True)[0] for p in PROMPTS}
    for rid, p in zip(ids, prompts):
        assert got[rid][0] == want[p], p
        assert got[rid][2].stats["queue_ms"] >= 0


def test_a_free_slot_keeps_its_prefix_for_the_next_request(program):
    first, second = "A cat sat on the mat and", "A cat sat on the mat and then it slept"
    runner = Runner(program)
    runner.generate(first, max_new_tokens=4, temperature=0)
    want = runner.generate(second, max_new_tokens=6, temperature=0, ignore_eos=True)
    assert runner.stats.reused_tokens > 0

    batch = BatchRunner(program, slots=2)
    batch.submit(first, max_new_tokens=4, temperature=0)
    run_all(batch)
    rid = batch.submit(second, max_new_tokens=6, temperature=0, ignore_eos=True)
    final = run_all(batch)[rid]
    assert final[2].stats["reused_tokens"] == runner.stats.reused_tokens
    assert final[1] == want


def test_cancel_frees_the_slot_and_leaves_the_others_alone(program):
    options = dict(max_new_tokens=20, temperature=0, ignore_eos=True)
    want = alone(program, "The sea", **options)
    batch = BatchRunner(program, slots=2)
    victim = batch.submit("Once upon a time", max_new_tokens=200, temperature=0, ignore_eos=True)
    keep = batch.submit("The sea", **options)
    waiting = batch.submit("A cat", **options)  # no slot yet: it gets the victim's
    got: dict = {}
    for _ in range(6):
        collect(got, batch.step())
    assert batch.active == 2 and batch.queued == 1
    canceller = threading.Thread(target=batch.cancel, args=(victim,))  # from another thread
    canceller.start()
    canceller.join()
    got = run_all(batch, got)
    assert got[victim][2].finish_reason == "cancelled"
    assert got[keep][0] == want[0] and got[keep][2].finish_reason == "max_new_tokens"
    assert got[waiting][2].finish_reason == "max_new_tokens"
    assert batch.active == 0
    batch.cancel(victim)  # finished: no effect
    batch.cancel(10**9)   # unknown: no effect
    assert batch.step() == []


def test_cancel_a_queued_request(program):
    batch = BatchRunner(program, slots=1)
    first = batch.submit("The sea", max_new_tokens=3, temperature=0)
    queued = batch.submit("A cat", max_new_tokens=3, temperature=0)
    batch.cancel(queued)
    events = batch.step()
    assert [(e.request, e.finish_reason, e.token) for e in events if e.request == queued] == [(queued, "cancelled", -1)]
    assert run_all(batch, collect({}, events))[first][2] is not None


def test_stop_strings_and_stop_tokens(program):
    options = dict(max_new_tokens=24, temperature=0, ignore_eos=True)
    _, text, _ = alone(program, "Once upon a time", **options)
    stop = text[5:8]
    assert stop and stop in text
    batch = BatchRunner(program)
    rid = batch.submit("Once upon a time", stop=[stop], **options)
    tokens, got, final = run_all(batch)[rid]
    assert final.finish_reason == "stop_string" and got == text[:text.index(stop)]
    first_token = alone(program, "Once upon a time", **options)[0][0]
    rid = batch.submit("Once upon a time", stop_tokens=[first_token], **options)
    tokens, got, final = run_all(batch)[rid]
    assert final.finish_reason == "stop_token" and tokens == [] and got == ""


def test_logprobs_are_the_models_distribution(program):
    batch = BatchRunner(program)
    rid = batch.submit("The sea", max_new_tokens=4, temperature=0, ignore_eos=True, logprobs=5)
    plain = batch.submit("The sea", max_new_tokens=4, temperature=0, ignore_eos=True)
    events = {rid: [], plain: []}
    while batch.has_work:
        for e in batch.step():
            events[e.request].append(e)
    for e in events[rid]:
        top = e.top_logprobs
        assert len(top) == 5 and [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
        assert top[0][0] == e.token and math.isclose(top[0][1], e.logprob)  # greedy: the most likely
        assert e.logprob <= 0 and sum(math.exp(lp) for _, lp in top) <= 1 + 1e-5
    assert [e.token for e in events[rid]] == [e.token for e in events[plain]]
    assert all(e.top_logprobs == [] for e in events[plain])


def _mask(vocab: int, allowed) -> bytes:
    words = [0] * ((vocab + 31) // 32)
    for i in allowed:
        words[i // 32] |= 1 << (i % 32)
    return b"".join(w.to_bytes(4, "little") for w in words)


def test_a_token_mask_constrains_the_next_token_only(program):
    batch = BatchRunner(program)
    vocab = batch.config["vocab_size"]
    forced = batch.tokenizer.encode(" zebra")[0]
    free = alone(program, "The sea", max_new_tokens=3, temperature=0, ignore_eos=True)[0]
    assert free[0] != forced
    rid = batch.submit("The sea", max_new_tokens=3, temperature=0, ignore_eos=True)
    batch.set_token_mask(rid, _mask(vocab, [forced]))
    tokens = run_all(batch)[rid][0]
    assert tokens[0] == forced and len(tokens) == 3  # then unconstrained again


def test_a_constrained_request_waits_for_its_mask(program):
    batch = BatchRunner(program, slots=2)
    vocab = batch.config["vocab_size"]
    held = batch.submit("The sea", max_new_tokens=2, temperature=0, ignore_eos=True, constrained=True)
    other = batch.submit("A cat", max_new_tokens=4, temperature=0, ignore_eos=True)
    seen = []
    for _ in range(20):
        seen += [e.request for e in batch.step()]
    assert held not in seen and seen.count(other) == 4
    assert batch.active == 1
    ids = batch.tokenizer.encode(" one two")
    for want in ids:
        batch.set_token_mask(held, _mask(vocab, [want]))
        events = [e for e in batch.step() if e.request == held]
        while not events:
            events = [e for e in batch.step() if e.request == held]
        assert events[0].token == want
    assert events[0].finished and batch.active == 0


def test_bad_requests_are_refused_before_queueing(program, tmp_path):
    batch = BatchRunner(program)
    context = batch.config["context_length"]
    with pytest.raises(kiln.InvalidArgument, match="the prompt is empty"):
        batch.submit("")
    with pytest.raises(kiln.InvalidArgument, match="context holds"):
        batch.submit([1] * context)
    with pytest.raises(kiln.InvalidArgument, match="logprobs"):
        batch.submit("a", logprobs=21)
    with pytest.raises(kiln.InvalidArgument, match="temperature"):
        batch.submit("a", temperature=-1)
    assert batch.queued == 0
    rid = batch.submit("a", max_new_tokens=1)
    with pytest.raises(kiln.InvalidArgument, match="words"):
        batch.set_token_mask(rid, b"\0" * 8)
    with pytest.raises(kiln.InvalidArgument, match="allows no token"):
        batch.set_token_mask(rid, _mask(batch.config["vocab_size"], []))
    with pytest.raises(kiln.InvalidArgument, match="8 KV cache slots"):
        BatchRunner(program, slots=TINY_SLOTS + 1)


def test_submissions_and_cancellations_from_threads_while_a_worker_steps(program):
    """8 client threads submit 32 requests and cancel some at random while one worker steps."""
    batch = BatchRunner(program, slots=4)
    want = {p: alone(program, p, max_new_tokens=6, temperature=0, ignore_eos=True)[0] for p in PROMPTS}
    done: dict = {}
    finished = threading.Event()
    lock = threading.Lock()
    submitted: list = []

    def worker():
        while not finished.is_set() or batch.has_work:
            for e in batch.step():
                with lock:
                    tokens = done.setdefault(e.request, [[], None])
                    if e.token >= 0:
                        tokens[0].append(e.token)
                    if e.finished:
                        tokens[1] = e.finish_reason

    def client(seed: int):
        rng = random.Random(seed)
        for _ in range(4):
            p = rng.choice(PROMPTS)
            rid = batch.submit(p, max_new_tokens=6, temperature=0, ignore_eos=True)
            cancelled = rng.random() < 0.3
            if cancelled:
                batch.cancel(rid)
            with lock:
                submitted.append((rid, p, cancelled))

    w = threading.Thread(target=worker)
    w.start()
    clients = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    finished.set()
    w.join(timeout=300)
    assert not w.is_alive()
    assert len(submitted) == 32 and batch.active == 0 and batch.queued == 0
    for rid, p, cancelled in submitted:
        tokens, reason = done[rid]
        if cancelled:
            assert reason in ("cancelled", "max_new_tokens"), reason
            assert tokens == want[p][:len(tokens)]
        else:
            assert reason == "max_new_tokens" and tokens == want[p], p
