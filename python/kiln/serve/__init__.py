"""kiln serve: an OpenAI-compatible HTTP server over kiln.llm.BatchRunner (docs/serving.md).

    kiln serve model.kiln --slots 4 --port 8000        # or python -m kiln serve ...

    from kiln.serve import Server
    app = Server(kiln.llm.BatchRunner("model.kiln", slots=4), model_id="model").app()   # an ASGI app

Needs the `serve` extra (Starlette, uvicorn, llguidance): pip install 'kiln[serve]'.
"""

from __future__ import annotations

import os
import sys
import threading

EXTRA_HINT = "pip install 'kiln[serve]'"


def missing_dependencies() -> list:
    import importlib

    missing = []
    for name in ("starlette", "uvicorn"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def __getattr__(name):
    if name == "Server":
        from .app import Server

        return Server
    raise AttributeError(name)


def model_id_of(path: str) -> str:
    base = os.path.basename(os.fspath(path))
    return base[:-len(".kiln")] if base.endswith(".kiln") else base


def run(args) -> int:
    """`kiln serve` with its parsed arguments (kiln._llm_cli)."""
    missing = missing_dependencies()
    if missing:
        print(f"kiln: kiln serve needs {' and '.join(missing)}: {EXTRA_HINT}", file=sys.stderr)
        return 1
    import logging

    import uvicorn

    import kiln.llm

    from .app import Server

    BatchRunner = getattr(kiln.llm, "BatchRunner", None)
    if BatchRunner is None:
        print("kiln: this kiln has no kiln.llm.BatchRunner (the batched engine kiln serve runs on)",
              file=sys.stderr)
        return 1
    from .. import errors

    for flag, value, low in (("--slots", args.slots, 0), ("--max-queue", args.max_queue, 0),
                             ("--threads", args.threads, 0), ("--port", args.port, 0)):
        if value < low:
            raise errors.InvalidArgument(f"{flag} must be >= {low}, got {value}")
    if args.port > 65535:
        raise errors.InvalidArgument(f"--port must be at most 65535, got {args.port}")
    batch = BatchRunner(args.program, slots=args.slots, num_threads=args.threads)
    api_key = args.api_key if args.api_key is not None else os.environ.get("KILN_API_KEY") or None
    server = Server(batch, model_id=args.model_name or model_id_of(args.program), api_key=api_key,
                    max_queue=args.max_queue, ctx=args.ctx)
    logging.basicConfig(level=logging.INFO, format="kiln serve: %(message)s")
    if args.host not in ("127.0.0.1", "localhost", "::1") and api_key is None:
        print(f"kiln serve: warning: listening on {args.host} without --api-key: anyone who reaches this port "
              "can use the model", file=sys.stderr)
    print(f"kiln serve: {server.model_id} ({batch.slots} slots, context {server.context}, queue "
          f"{args.max_queue}) on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    config = uvicorn.Config(server.app(), host=args.host, port=args.port, log_level=args.log_level,
                            access_log=args.log_level == "debug", timeout_graceful_shutdown=5,
                            lifespan="on", server_header=False)

    class Uvicorn(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            # Ctrl-C / SIGTERM: end the generations in flight now (their clients are told), so
            # the graceful shutdown does not wait for whole answers. From a thread: this runs
            # in a signal handler.
            threading.Thread(target=server.worker.shutdown, daemon=True).start()
            super().handle_exit(sig, frame)

    Uvicorn(config).run()
    return 0
