"""The LLM commands of `kiln` (also `python -m kiln`): `kiln llm export`, `kiln generate`, `kiln chat`."""

from __future__ import annotations

import argparse
import sys

COMMANDS = ("llm", "generate", "chat")


def _sampling_args(p: argparse.ArgumentParser, temperature: float) -> None:
    p.add_argument("--max-new-tokens", type=int, default=256, metavar="N", help="at most N new tokens (default 256)")
    p.add_argument("--temperature", type=float, default=temperature, metavar="T",
                   help=f"sampling temperature; 0 is greedy (default {temperature})")
    p.add_argument("--top-k", type=int, default=40, metavar="K", help="keep the K most likely tokens; 0: all (default 40)")
    p.add_argument("--top-p", type=float, default=0.95, metavar="P", help="nucleus sampling mass (default 0.95)")
    p.add_argument("--min-p", type=float, default=0.05, metavar="P",
                   help="drop tokens less likely than P times the most likely one (default 0.05)")
    p.add_argument("--repetition-penalty", type=float, default=1.0, metavar="R", help="> 1 discourages repeats (default 1)")
    p.add_argument("--seed", type=int, default=-1, metavar="S", help="the same seed gives the same text (default: random)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", help="stop after TEXT (repeatable)")
    p.add_argument("--ignore-eos", action="store_true", help="do not stop at the model's end-of-turn tokens")
    p.add_argument("--threads", type=int, default=0, metavar="N",
                   help="threads of the runtime's pool (default: KILN_NUM_THREADS, else one per core)")
    p.add_argument("--stats", action="store_true", help="print timings and tokens per second to stderr")


def add_commands(sub) -> None:
    """Adds the LLM subcommands to the `kiln` parser's subparsers."""
    llm = sub.add_parser("llm", help="LLM programs: `kiln llm export model.gguf -o model.kiln`")
    llm_sub = llm.add_subparsers(dest="llm_command")
    p = llm_sub.add_parser("export", help="export a GGUF Llama-family model (with its tokenizer) to one .kiln file")
    p.add_argument("gguf", help="the model, a .gguf file (llama architecture: Llama, SmolLM2)")
    p.add_argument("-o", "--output", required=True, help="the .kiln file to write")
    p.add_argument("--quantize", choices=("int8", "int4"), help="re-quantize the weights (needs kiln's quantized operators)")
    p.add_argument("--dtype", choices=("float32",), help="float32 weights (dequantized from the GGUF)")
    p.add_argument("--context", type=int, default=2048, metavar="N",
                   help="positions of the KV cache (default 2048, at most the model's own)")
    p.add_argument("--max-tokens-per-call", type=int, default=128, metavar="N",
                   help="largest prefill chunk (default 128)")
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


def run(args, parser: argparse.ArgumentParser) -> int:
    if args.command == "llm":
        if getattr(args, "llm_command", None) != "export":
            parser.parse_args(["llm", "--help"])
            return 2
        return _export(args)
    if args.command == "generate":
        return _generate(args)
    return _chat(args)


def _export(args) -> int:
    try:
        from .llm.export import export_gguf
    except ImportError as e:
        print(f"kiln: kiln llm export needs torch (pip install 'kiln[export]'): {e}", file=sys.stderr)
        return 1
    report = export_gguf(args.gguf, args.output, dtype=args.dtype, quantize=args.quantize, context=args.context,
                         max_tokens_per_call=args.max_tokens_per_call, n_layers=args.layers)
    print(report)
    return 0


def _options(args) -> dict:
    return dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                top_p=args.top_p, min_p=args.min_p, repetition_penalty=args.repetition_penalty, seed=args.seed,
                stop=args.stop, ignore_eos=args.ignore_eos)


def _print_stats(runner) -> None:
    s = runner.stats
    print(f"load {s.load_ms:.1f} ms", file=sys.stderr)
    print(f"prompt {s.prompt_tokens} tokens ({s.reused_tokens} reused from the cache), "
          f"time to first token {s.time_to_first_token_ms:.1f} ms", file=sys.stderr)
    print(f"prefill {s.prefill_tokens_per_s:.1f} tok/s", file=sys.stderr)
    print(f"decode {s.decode_tokens_per_s:.1f} tok/s ({s.generated_tokens} tokens, {s.finish_reason})", file=sys.stderr)


def _stream(pieces) -> None:
    try:
        for piece in pieces:
            sys.stdout.write(piece)
            sys.stdout.flush()
    except KeyboardInterrupt:
        pieces.close()  # cancels the generation
        raise


def _generate(args) -> int:
    from .llm import Runner

    runner = Runner(args.program, num_threads=args.threads)
    if args.chat:
        pieces = runner.chat_stream([("user", args.prompt)], **_options(args))
    else:
        pieces = runner.stream(args.prompt, **_options(args))
    try:
        _stream(pieces)
    except KeyboardInterrupt:
        print(flush=True)
        return 130
    print(flush=True)
    if args.stats:
        _print_stats(runner)
    return 0


def _chat(args) -> int:
    from .llm import Runner

    runner = Runner(args.program, num_threads=args.threads)
    if runner.chat_template is None:
        from .errors import NotSupported

        raise NotSupported(f"'{args.program}' has no chat template kiln knows (supported: ChatML); "
                           "use `kiln generate` instead")
    interactive = sys.stdin.isatty()
    if interactive:
        print("kiln chat: type a message; /reset starts over, /exit (or Ctrl-D) quits", file=sys.stderr)
    messages = [("system", args.system)] if args.system else []
    while True:
        if interactive:
            print("> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line or line.strip() == "/exit":
            return 0
        text = line.rstrip("\n")
        if text.strip() == "/reset":
            messages = messages[:1] if args.system else []
            runner.reset()
            continue
        if not text.strip():
            continue
        messages.append(("user", text))
        answer = []
        try:
            for piece in runner.chat_stream(messages, **_options(args)):
                answer.append(piece)
                sys.stdout.write(piece)
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass  # the answer so far stays in the conversation
        print(flush=True)
        messages.append(("assistant", "".join(answer)))
        if args.stats:
            _print_stats(runner)
