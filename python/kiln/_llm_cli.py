"""The LLM commands of `kiln` (also `python -m kiln`): `kiln llm export`, `kiln generate`, `kiln chat`,
`kiln serve` (an OpenAI-compatible HTTP server, kiln.serve)."""

from __future__ import annotations

import argparse
import os
import sys

COMMANDS = ("llm", "generate", "chat", "serve")


def _sampling_args(p: argparse.ArgumentParser, temperature: float) -> None:
    p.add_argument("--max-new-tokens", type=int, default=256, metavar="N", help="at most N new tokens (default 256)")
    p.add_argument("--temperature", type=float, default=temperature, metavar="T",
                   help=f"sampling temperature; 0 is greedy (default {temperature})")
    p.add_argument("--top-k", type=int, default=40, metavar="K",
                   help="keep the K most likely tokens; 0: all (default 40)")
    p.add_argument("--top-p", type=float, default=0.95, metavar="P", help="nucleus sampling mass (default 0.95)")
    p.add_argument("--min-p", type=float, default=0.05, metavar="P",
                   help="drop tokens less likely than P times the most likely one (default 0.05)")
    p.add_argument("--repetition-penalty", type=float, default=1.0, metavar="R",
                   help="> 1 discourages repeats (default 1)")
    p.add_argument("--seed", type=int, default=-1, metavar="S",
                   help="the same seed gives the same text (default: random)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", help="stop after TEXT (repeatable)")
    p.add_argument("--ignore-eos", action="store_true", help="do not stop at the model's end-of-turn tokens")
    p.add_argument("--threads", type=int, default=0, metavar="N",
                   help="threads of the runtime's pool (default: KILN_NUM_THREADS, else one per core)")
    p.add_argument("--stats", action="store_true", help="print timings and tokens per second to stderr")


def add_commands(sub) -> None:
    """Adds the LLM subcommands to the `kiln` parser's subparsers."""
    from .llm import KV_CACHE_DTYPES
    llm = sub.add_parser("llm", help="LLM programs: `kiln llm export model.gguf -o model.kiln`")
    llm_sub = llm.add_subparsers(dest="llm_command")
    p = llm_sub.add_parser("export", help="export a GGUF decoder (with its tokenizer) to one .kiln file")
    p.add_argument("gguf", help="the model, a .gguf file (architecture llama, qwen2, qwen3 or phi3)")
    p.add_argument("-o", "--output", required=True, help="the .kiln file to write")
    p.add_argument("--quantize", choices=("int8", "int4"),
                   help="re-quantize the weights (needs kiln's quantized operators)")
    p.add_argument("--dtype", choices=("float32",), help="float32 weights (dequantized from the GGUF)")
    p.add_argument("--compute", choices=("float32", "int8"),
                   help="the GGUF blocks' linears: int8 (the default) quantizes their input per 32-block at run "
                        "time and multiplies in integers, faster at a perplexity change within 1%%; float32 "
                        "multiplies the decoded blocks with float32 inputs (docs/llm.md)")
    p.add_argument("--context", type=int, default=2048, metavar="N",
                   help="positions of the KV cache (default 2048, at most the model's own)")
    p.add_argument("--max-tokens-per-call", type=int, default=128, metavar="N",
                   help="largest prefill chunk (default 128)")
    p.add_argument("--slots", type=int, default=1, metavar="N",
                   help="sequences decoded together (kiln serve, kiln.llm.BatchRunner): the KV cache holds N "
                        "regions of --context positions (default 1)")
    p.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="float32",
                   help="the KV cache's dtype: float16 or bfloat16 halve its memory, each key and value rounded "
                        "(default float32)")
    p.add_argument("--layers", type=int, metavar="N", help=argparse.SUPPRESS)  # first N layers only: quick test models

    p = sub.add_parser("generate", help="generate text from a .kiln LLM program (streams it to stdout)")
    p.add_argument("program")
    p.add_argument("--prompt", required=True, help="the prompt (special tokens such as <|im_start|> are parsed)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template as a user message")
    _sampling_args(p, temperature=0.8)

    p = sub.add_parser("chat", help="an interactive chat with a .kiln LLM program (its chat template)")
    p.add_argument("program")
    p.add_argument("--system", help="the system message (default: the template's own, if any)")
    _sampling_args(p, temperature=0.8)

    p = sub.add_parser("serve", help="an OpenAI-compatible HTTP server for a .kiln LLM program (docs/serving.md; "
                                     "pip install 'kiln[serve]')")
    p.add_argument("program")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--slots", type=int, default=0, metavar="N",
                   help="requests generated together (default: all the file has, kiln llm export --slots)")
    p.add_argument("--api-key", metavar="KEY",
                   help="require 'Authorization: Bearer KEY' on every route but /health (default: KILN_API_KEY)")
    p.add_argument("--max-queue", type=int, default=64, metavar="N",
                   help="requests that may wait for a slot; more are answered 429 (default 64)")
    p.add_argument("--ctx", type=int, metavar="N",
                   help="context of a request, prompt and answer (default and at most: the program's)")
    p.add_argument("--threads", type=int, default=0, metavar="N",
                   help="threads of the runtime's pool (default: KILN_NUM_THREADS, else one per core)")
    p.add_argument("--model-name", metavar="NAME", help="the model's id in the API (default: the file's name)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="uvicorn's log level (default info; debug adds one line per request)")


def run(args, parser: argparse.ArgumentParser) -> int:
    if args.command == "llm":
        if getattr(args, "llm_command", None) != "export":
            parser.parse_args(["llm", "--help"])
            return 2
        return _export(args)
    if args.command == "generate":
        return _generate(args)
    if args.command == "serve":
        from .serve import run as serve

        return serve(args)
    return _chat(args)


def _export(args) -> int:
    try:
        from .llm.export import export_gguf
    except ImportError as e:
        print(f"kiln: kiln llm export needs torch (pip install 'kiln[export]'): {e}", file=sys.stderr)
        return 1
    report = export_gguf(args.gguf, args.output, dtype=args.dtype, quantize=args.quantize, context=args.context,
                         max_tokens_per_call=args.max_tokens_per_call, slots=args.slots, n_layers=args.layers,
                         kv_cache_dtype=args.kv_cache_dtype, compute=args.compute)
    print(report)
    return 0


def _text_option(flag: str, value):
    """`value` as given on the command line, refused (InvalidArgument naming the flag) unless it is UTF-8."""
    from .errors import InvalidArgument

    if value is None:
        return None
    if isinstance(value, list):
        return [_text_option(flag, v) for v in value]
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(value)  # the bytes given: the OS decoded them with surrogateescape
        try:
            raw.decode("utf-8")
            at = 0
        except UnicodeDecodeError as e:
            at = e.start
        raise InvalidArgument(f"{flag} is not valid UTF-8 text (byte 0x{raw[at]:02x} at offset {at})") from None
    return value


def _options(args) -> dict:
    return dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                top_p=args.top_p, min_p=args.min_p, repetition_penalty=args.repetition_penalty, seed=args.seed,
                stop=_text_option("--stop", args.stop), ignore_eos=args.ignore_eos)


def _print_stats(runner) -> None:
    s = runner.stats
    print(f"load {s.load_ms:.1f} ms (program {s.load_program_ms:.1f} ms, metadata {s.load_metadata_ms:.1f} ms, "
          f"method {s.load_method_ms:.1f} ms)", file=sys.stderr)
    print(f"prompt {s.prompt_tokens} tokens ({s.reused_tokens} reused from the cache), "
          f"time to first token {s.time_to_first_token_ms:.1f} ms", file=sys.stderr)
    print(f"prefill {s.prefill_tokens_per_s:.1f} tok/s", file=sys.stderr)
    print(f"decode {s.decode_tokens_per_s:.1f} tok/s ({s.generated_tokens} tokens, {s.finish_reason})", file=sys.stderr)


def _stream(pieces) -> str:
    """Writes the pieces to stdout as they come; returns the text. Ctrl-C (or a
    closed stdout) cancels the generation before it propagates."""
    text = []
    try:
        for piece in pieces:
            text.append(piece)
            sys.stdout.write(piece)
            sys.stdout.flush()
    except BaseException:
        pieces.close()
        raise
    return "".join(text)


def _generate(args) -> int:
    from .llm import Runner

    prompt = _text_option("--prompt", args.prompt)
    options = _options(args)
    runner = Runner(args.program, num_threads=args.threads)
    if args.chat:
        pieces = runner.chat_stream([("user", prompt)], **options)
    else:
        pieces = runner.stream(prompt, **options)
    try:
        _stream(pieces)
    except KeyboardInterrupt:
        print(flush=True)
        return 130
    print(flush=True)
    if args.stats:
        _print_stats(runner)
    return 0


class _Lines:
    """The user's lines: with line editing and history (Python's readline) on a
    terminal, else read from stdin as UTF-8 (InvalidArgument naming the line if not)."""

    def __init__(self):
        self.terminal = sys.stdin.isatty()
        self.editing = self.terminal and sys.stdout.isatty()
        if self.editing:
            try:
                import readline  # noqa: F401 (input() edits lines and keeps their history once it is imported)
            except ImportError:
                pass
        self.number = 0

    def read(self):
        """The next line without its newline; None at the end of input."""
        from .errors import InvalidArgument

        self.number += 1
        if self.editing:
            try:
                return input("> ")
            except EOFError:
                print(file=sys.stderr)
                return None
        if self.terminal:
            print("> ", end="", file=sys.stderr, flush=True)
        raw = sys.stdin.buffer.readline()
        if not raw:
            return None
        try:
            return raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise InvalidArgument(f"input line {self.number} is not valid UTF-8 text (byte 0x{raw[e.start]:02x} at "
                                  f"offset {e.start})") from None


def _chat(args) -> int:
    from .errors import KilnError, NotSupported
    from .llm import Runner

    system = _text_option("--system", args.system)
    options = _options(args)
    runner = Runner(args.program, num_threads=args.threads)
    if runner.chat_template is None:
        raise NotSupported(f"'{args.program}' has no chat template kiln knows (supported: ChatML); "
                           "use `kiln generate` instead")
    lines = _Lines()
    if lines.terminal:
        print("kiln chat: type a message; /reset starts over, /exit (or Ctrl-D) quits; Ctrl-C stops an answer "
              "(it is not kept), or quits at the prompt", file=sys.stderr)
    messages = [("system", system)] if system else []
    while True:
        try:
            line = lines.read()
        except KeyboardInterrupt:  # at the prompt: quit
            print(file=sys.stderr)
            return 0
        except UnicodeDecodeError as e:  # a terminal's line that is not UTF-8: say so, ask again
            print(f"kiln: InvalidArgument: that line is not valid UTF-8 text ({e.reason})", file=sys.stderr)
            continue
        if line is None or line.strip() == "/exit":
            return 0
        if line.strip() == "/reset":
            messages = messages[:1] if system else []
            runner.reset()
            continue
        if not line.strip():
            continue
        messages.append(("user", line))
        try:
            answer = _stream(runner.chat_stream(messages, **options))
        except KeyboardInterrupt:
            # The answer stops here and the turn is dropped (question and partial
            # answer), so the next message continues the conversation before it.
            messages.pop()
            print(flush=True)
            print("[cancelled: this turn is not kept in the conversation]", file=sys.stderr)
            continue
        except KilnError:
            messages.pop()
            raise
        print(flush=True)
        messages.append(("assistant", answer))
        if args.stats:
            _print_stats(runner)
