"""kiln.llm: text generation from one .kiln file (libkiln_llm.so.0; docs/llm.md).

    runner = kiln.llm.Runner("smollm2.kiln")
    print(runner.generate("The capital of France is", max_new_tokens=20, temperature=0))
    for piece in runner.stream("Tell me a story", max_new_tokens=100):
        print(piece, end="", flush=True)
    runner.stats                     # GenerationStats of the last call
    runner.chat([("user", "Hi!")])   # with the model's chat template

    batch = kiln.llm.BatchRunner("smollm2.kiln")   # many generations at once (kiln llm export --slots N)
    rid = batch.submit("Once upon a time", max_new_tokens=50)
    while batch.has_work:
        for event in batch.step():  # one forward call for every active request
            ...

    kiln.llm.export_gguf("model.gguf", "model.kiln", dtype="float32")   # needs torch

Tokenizer, StreamDecoder, ChatTemplate and read_gguf are the native pieces the
runner is made of. Importing this package needs numpy only; export_gguf
imports torch when it is called.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Sequence

from .._kiln import llm as _native
from .._program import DEFAULT_MAX_MEMORY_BYTES
from ..errors import InvalidArgument, Superseded

Tokenizer = _native.Tokenizer
StreamDecoder = _native.StreamDecoder
ChatTemplate = _native.ChatTemplate
read_gguf = _native.read_gguf
Sampler = _native.Sampler
TokenEvent = _native.TokenEvent

# What `kiln llm export --kv-cache-dtype` takes (kiln.llm.export checks it).
KV_CACHE_DTYPES = ("float32", "float16", "bfloat16")

__all__ = ["Runner", "Stream", "GenerationStats", "BatchRunner", "TokenEvent", "Tokenizer", "StreamDecoder",
           "ChatTemplate", "Sampler", "read_gguf", "export_gguf"]


@dataclass(frozen=True)
class GenerationStats:
    """What the last generate/stream/chat call did and how fast.

    prefill_tokens_per_s counts the prompt tokens computed (those whose cache
    entries were kept from the call before, reused_tokens, are not);
    decode_tokens_per_s counts the one-token steps after the first token.
    finish_reason: "stop_token", "stop_string", "max_new_tokens",
    "context_full" or "cancelled". queue_ms: a BatchRunner request's wait for
    a slot (0 for Runner).
    """

    load_ms: float
    load_program_ms: float   # load_ms's parts: the file mapped and verified,
    load_metadata_ms: float  # the config, tokenizer and chat template read,
    load_method_ms: float    # the method loaded (kernels chosen, weights packed or mapped)
    queue_ms: float
    prompt_tokens: int
    reused_tokens: int
    generated_tokens: int
    time_to_first_token_ms: float
    prefill_ms: float
    decode_ms: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    finish_reason: str


def _messages(messages) -> list:
    """[(role, content)] from [(role, content)] or [{"role": ..., "content": ...}]."""
    out = []
    try:
        items = list(messages)
    except TypeError:
        raise InvalidArgument(f"messages must be a list of (role, content) pairs, not {type(messages).__name__}") \
            from None
    for i, m in enumerate(items):
        if isinstance(m, dict):
            if "role" not in m or "content" not in m:
                raise InvalidArgument(f"messages[{i}] has no 'role' or no 'content'")
            out.append((m["role"], m["content"]))
        elif isinstance(m, (tuple, list)) and len(m) == 2:
            out.append(tuple(m))
        else:
            raise InvalidArgument(f"messages[{i}] must be a (role, content) pair or a dict, got {m!r:.40}")
    return out


def _stops(stop) -> list:
    return [stop] if isinstance(stop, str) else list(stop or [])


class Stream:
    """The text of one generation, piece by piece (what Runner.stream returns).

    Iterate it; `stats` and `tokens` are this generation's once it has ended.
    `close()` (or leaving a for loop over it early, or dropping it) cancels the
    generation, unless another has begun on the runner since: a stream never
    touches another generation. If another generation begins while this one is
    suspended (another thread, or a second stream of the same runner), the next
    step raises kiln.Superseded instead of yielding that generation's text.
    """

    def __init__(self, runner: "Runner", generation: int):
        self._runner = runner
        self._generation = generation
        self._done = False
        self.stats: GenerationStats | None = None
        self.tokens: list | None = None

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        while not self._done:
            try:
                more, piece, outcome = self._runner._native.next(self._generation)
            except Superseded:
                self._done = True
                raise
            if not more:
                self._finish(outcome)
            if piece:
                return piece
        raise StopIteration

    def _finish(self, outcome) -> None:
        self._done = True
        if outcome is not None:
            tokens, stats = outcome
            self.tokens, self.stats = list(tokens), GenerationStats(**stats)
            self._runner._remember(self.tokens, self.stats)

    def close(self) -> None:
        """Cancels the generation if it is still running (finish_reason "cancelled")."""
        if not self._done:
            self._done = True
            self._finish(self._runner._native.finish(self._generation))

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # a finalizer that runs inside the runner's own call: the next begin ends it
            pass


class Runner:
    """Generates text from a .kiln LLM program (kiln llm export): the weights, tokenizer,
    chat template and config all come from the file.

    Sampling: temperature (0: greedy), top_k (0: all), top_p, min_p,
    repetition_penalty (1: none), seed (-1: from the OS; the same seed gives
    the same text). Generation stops at max_new_tokens, a stop token (the
    model's end-of-turn tokens and `stop_tokens`), a stop string (not part of
    the text), the end of the context, or a cancellation.

    The KV cache persists across calls: a prompt that extends the previous one
    (a conversation) computes only its new tokens.

    Threads (docs/threads-and-files.md): a Runner may be shared. Calls take
    turns (waiting with the GIL released): generate() and chat() run the whole
    generation in one turn, so each caller gets its own answer; a stream takes
    a turn per step, and a generation begun by another caller between two steps
    supersedes it (kiln.Superseded). cancel() stops the current generation
    from any thread. `stats` and `generated_tokens` are those of the calling
    thread's last generation. For parallel generations, load one Runner per
    thread.
    """

    def __init__(self, path, *, num_threads: int = 0, kernels: str = "", isa: str = "",
                 max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES):
        try:
            self.path = os.fspath(path)
        except TypeError:
            raise InvalidArgument(f"kiln.llm.Runner: path must be a str or os.PathLike, not {type(path).__name__}") \
                from None
        self._native = _native.Runner.load(self.path, max_memory_bytes, kernels, isa, num_threads)
        self.config: dict = self._native.config
        self.tokenizer: Tokenizer = self._native.tokenizer
        self.chat_template = self._native.chat_template
        self._local = threading.local()

    def _remember(self, tokens: list, stats: GenerationStats) -> None:
        self._local.tokens, self._local.stats = tokens, stats

    @property
    def stats(self) -> GenerationStats:
        """The stats of this thread's last finished generation (before any: the runner's)."""
        stats = getattr(self._local, "stats", None)
        return stats if stats is not None else GenerationStats(**self._native.stats)

    @property
    def generated_tokens(self) -> list:
        """The ids generated by this thread's last finished generation (stop token excluded)."""
        tokens = getattr(self._local, "tokens", None)
        return list(tokens) if tokens is not None else list(self._native.generated_tokens)

    def _args(self, prompt, max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed,
              stop, stop_tokens, ignore_eos) -> tuple:
        if isinstance(prompt, str):
            ids = self._native.encode(prompt) if prompt else []
        else:
            ids = prompt
        return (ids, max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed, _stops(stop),
                list(stop_tokens or []), ignore_eos)

    def stream(self, prompt, *, max_new_tokens: int = 256, temperature: float = 0.8, top_k: int = 40,
               top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0, seed: int = -1,
               stop: Sequence[str] | str | None = None, stop_tokens: Sequence[int] | None = None,
               ignore_eos: bool = False) -> Stream:
        """Yields the generated text piece by piece (never half a UTF-8 character).
        `prompt` is text (special tokens such as <|im_start|> are parsed) or token ids.
        ignore_eos: do not stop at the model's own end-of-turn tokens (benchmarks).
        Leaving the loop early (or close()) cancels the generation (finish_reason "cancelled")."""
        args = self._args(prompt, max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed, stop,
                          stop_tokens, ignore_eos)
        return Stream(self, self._native.begin(*args))

    def generate(self, prompt, *, max_new_tokens: int = 256, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0, seed: int = -1,
                 stop: Sequence[str] | str | None = None, stop_tokens: Sequence[int] | None = None,
                 ignore_eos: bool = False) -> str:
        """The generated text (the prompt excluded); takes the options of stream()."""
        args = self._args(prompt, max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed, stop,
                          stop_tokens, ignore_eos)
        text, tokens, stats = self._native.generate(*args)
        self._remember(list(tokens), GenerationStats(**stats))
        return text

    def _chat_prompt(self, messages, options: dict) -> str:
        prompt = self._native.chat_prompt(_messages(messages))
        options["stop"] = _stops(options.get("stop")) + ["<|im_end|>"]
        return prompt

    def chat(self, messages, **options) -> str:
        """The assistant's answer to `messages` ([(role, content)] or [{"role", "content"}]),
        rendered with the model's chat template; takes the options of stream()."""
        return self.generate(self._chat_prompt(messages, options), **options)

    def chat_stream(self, messages, **options) -> Stream:
        return self.stream(self._chat_prompt(messages, options), **options)

    def cancel(self) -> None:
        """Stops the generation in progress at its next token (finish_reason "cancelled"),
        whichever thread runs it; from any thread. No effect when none is running."""
        self._native.cancel()

    def reset(self) -> None:
        """Forget the KV cache: the next prompt is computed from scratch (waits for the call in progress)."""
        self._native.reset()

    def __repr__(self) -> str:
        c = self.config
        return (f"<kiln.llm.Runner {self.path}: {c['name'] or c['architecture']}, context {c['context_length']}, "
                f"weights {c['weights']}>")


class BatchRunner:
    """Many generations at once from one .kiln LLM program (docs/llm.md, "Batched generation").

    The program's KV cache has `slots` regions (kiln llm export --slots N); each
    running request has one, and step() computes the next token of every running
    request in one forward call (or a chunk of one request's prompt). A finished
    request's slot keeps its tokens: a new request whose prompt starts the same way
    goes there and computes only the rest.

    submit(), set_token_mask() and cancel() may be called from any thread; step()
    from one thread at a time (it runs with the GIL released). Each request samples
    with its own options and seed, so it gets the same text whatever else runs.
    """

    def __init__(self, path, *, slots: int = 0, num_threads: int = 0, kernels: str = "", isa: str = "",
                 max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES):
        try:
            self.path = os.fspath(path)
        except TypeError:
            raise InvalidArgument(
                f"kiln.llm.BatchRunner: path must be a str or os.PathLike, not {type(path).__name__}") from None
        self._native = _native.BatchRunner.load(self.path, max_memory_bytes, kernels, isa, num_threads, slots)
        self.config: dict = self._native.config
        self.tokenizer: Tokenizer = self._native.tokenizer
        self.chat_template = self._native.chat_template
        self.slots: int = self._native.slots

    def chat_prompt(self, messages) -> str:
        """`messages` ([(role, content)] or [{"role", "content"}]) rendered with the chat template."""
        return self._native.chat_prompt(_messages(messages))

    @property
    def chat_stop_strings(self) -> list:
        """The strings that end an assistant's turn (add them to a chat request's `stop`)."""
        return list(self._native.chat_stop_strings)

    def submit(self, prompt, *, max_new_tokens: int = 256, temperature: float = 0.8, top_k: int = 40,
               top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0, seed: int = -1,
               stop: Sequence[str] | str | None = None, stop_tokens: Sequence[int] | None = None,
               ignore_eos: bool = False, logprobs: int = -1, constrained: bool = False) -> int:
        """Queues a request and returns its id (the options of Runner.stream).

        logprobs: -1 none; n >= 0: each event has the token's logprob and the n most
        likely tokens'. constrained: never sampled without a mask (set_token_mask).
        Raises kiln.InvalidArgument, queueing nothing, for a bad option or prompt."""
        ids = (self._native.encode(prompt) if prompt else []) if isinstance(prompt, str) else prompt
        return self._native.submit(ids, max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed,
                                   _stops(stop), list(stop_tokens or []), ignore_eos, logprobs, constrained)

    def set_token_mask(self, request: int, mask: bytes | None) -> None:
        """The tokens allowed for the request's next sampled token: ceil(vocab / 32)
        little-endian uint32 words, bit i % 32 of word i // 32 for token i (None: clear)."""
        self._native.set_token_mask(request, mask)

    def cancel(self, request: int) -> None:
        """Ends the request at the next step (finish_reason "cancelled"); any thread."""
        self._native.cancel(request)

    def step(self) -> list:
        """One forward call; the TokenEvents it produced (request, token, text,
        logprob, top_logprobs, finished, finish_reason, stats, error)."""
        return self._native.step()

    @property
    def queued(self) -> int:
        return self._native.queued

    @property
    def active(self) -> int:
        return self._native.active

    @property
    def has_work(self) -> bool:
        return self._native.queued + self._native.active > 0

    def __repr__(self) -> str:
        c = self.config
        return (f"<kiln.llm.BatchRunner {self.path}: {c['name'] or c['architecture']}, {self.slots} slots of "
                f"context {c['context_length']}, weights {c['weights']}>")


def export_gguf(gguf_path, out_path, **options):
    """kiln llm export as a function (needs torch); see kiln.llm.export.export_gguf."""
    from .export import export_gguf as _export

    return _export(gguf_path, out_path, **options)
