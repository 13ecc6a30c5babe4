"""The Starlette application of kiln serve: OpenAI's /v1/chat/completions, /v1/completions and
/v1/models, plus /health and /metrics (docs/serving.md).

Each HTTP request becomes `n` BatchRunner requests (one per choice) submitted to the worker
thread; their events come back through one asyncio queue. A client that goes away (its
connection closes, streaming or not) has its requests cancelled at once, so their slots free
within one step.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import math
import threading
import time
import uuid

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

import kiln

from . import constraints
from .metrics import Metrics
from .protocol import APIError, Sampling, bad, model_of, parse_chat, parse_completion
from .worker import QueueFull, ShuttingDown, Worker

log = logging.getLogger("kiln.serve")

MAX_BODY_BYTES = 1 << 20
BODY_TIMEOUT_S = 60.0  # a client trickling its body holds a connection, not more
_DISCONNECT = object()
FINISH = {"stop_token": "stop", "stop_string": "stop", "max_new_tokens": "length", "context_full": "length",
          "cancelled": "stop"}


def _finite(logprob: float) -> float:
    """JSON has no -inf or NaN: OpenAI writes -9999 for a token of probability 0."""
    return logprob if math.isfinite(logprob) else -9999.0


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


class SSEResponse(Response):
    """Server-sent events from an async iterator of bytes; the iterator is closed when the client
    goes away (it watches the connection itself, so a request still queued is cancelled too)."""

    def __init__(self, chunks, on_disconnect):
        super().__init__(status_code=200, media_type="text/event-stream",
                         headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.chunks = chunks
        self.on_disconnect = on_disconnect

    async def __call__(self, scope, receive, send) -> None:
        async def watch():
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.on_disconnect()
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client is gone (uvicorn's ClientDisconnected)
            self.on_disconnect()
        finally:
            watcher.cancel()
            await self.chunks.aclose()


class Choice:
    __slots__ = ("index", "text", "tokens", "finish_reason", "stats", "generated")

    def __init__(self, index: int):
        self.index = index
        self.text: list = []
        self.tokens: list = []  # (id, logprob, [(id, logprob)]) when logprobs were asked for
        self.finish_reason = None
        self.stats: dict = {}
        self.generated = 0


class Server:
    def __init__(self, batch, *, model_id: str, api_key: str | None = None, max_queue: int = 64,
                 ctx: int | None = None, max_body_bytes: int = MAX_BODY_BYTES):
        self.batch = batch
        self.config = batch.config
        self.tokenizer = batch.tokenizer
        self.context = int(self.config["context_length"])
        if ctx is not None:
            if not 1 < ctx <= self.context:
                raise kiln.InvalidArgument(f"--ctx must be from 2 to the program's context length "
                                           f"{self.context}, got {ctx}")
            self.context = ctx
        self.model_id = model_id
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.metrics = Metrics()
        self.worker = Worker(batch, self.metrics, max_queue=max_queue)
        self.created = int(time.time())
        self.fingerprint = f"kiln-{kiln.__version__}"
        self._guidance = None
        self._guidance_error: str | None = None
        self._guidance_lock = threading.Lock()
        self._token_text: dict = {}
        chat_stops = batch.chat_stop_strings
        self.chat_stops = list(chat_stops() if callable(chat_stops) else chat_stops)
        bos = self.config.get("bos_id", -1)
        self._bos = bos if self.config.get("add_bos") and bos is not None and bos >= 0 else None

    # ------------------------------------------------------------------ the application
    def app(self) -> Starlette:
        routes = [
            self._route("/v1/chat/completions", self.chat, ["POST"]),
            self._route("/v1/completions", self.completions, ["POST"]),
            self._route("/v1/models", self.models, ["GET"]),
            self._route("/v1/models/{model:path}", self.model, ["GET"], label="/v1/models/{model}"),
            self._route("/health", self.health, ["GET"], auth=False),
            self._route("/metrics", self.metrics_text, ["GET"]),
        ]

        async def http_error(request, exc: HTTPException):
            kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
            message = (f"no route {request.method} {request.url.path}" if exc.status_code in (404, 405)
                       else str(exc.detail))
            return JSONResponse(APIError(exc.status_code, message, type=kind).body(), status_code=exc.status_code)

        @contextlib.asynccontextmanager
        async def lifespan(app):
            self.worker.start()
            if constraints.llguidance is not None:  # building llguidance's tokenizer takes a while: not on a request
                threading.Thread(target=self._guidance_tokenizer, name="kiln-serve-llguidance", daemon=True).start()
            try:
                yield
            finally:
                await run_in_threadpool(self.worker.stop)

        return Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)

    def _route(self, path, handler, methods, *, auth: bool = True, label: str | None = None) -> Route:
        label = label or path

        async def endpoint(request: Request):
            status = 500
            try:
                if auth:
                    self._auth(request)
                response = await handler(request)
                status = response.status_code
                return response
            except APIError as e:
                status = e.status
                return JSONResponse(e.body(), status_code=e.status, headers=e.headers)
            except ClientDisconnect:  # gone while sending its body: nobody to answer
                status = 499
                return Response(status_code=499)
            except Exception:  # a bug of kiln's, not the client's: logged, answered 500
                log.exception("internal error on %s", path)
                return JSONResponse(APIError(500, "internal server error", type="server_error").body(),
                                    status_code=500)
            finally:
                self.metrics.request(label, status)

        return Route(path, endpoint, methods=methods)

    def _auth(self, request: Request) -> None:
        if self.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), self.api_key.encode()):
            raise APIError(401, "Incorrect API key provided" if header else
                           "You didn't provide an API key: send it as 'Authorization: Bearer KEY'",
                           code="invalid_api_key", headers={"www-authenticate": "Bearer"})

    async def _json(self, request: Request) -> dict:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise APIError(413, f"the request body is {length} bytes; at most {self.max_body_bytes} are accepted",
                           code="request_too_large")
        data = bytearray()

        async def read():
            async for chunk in request.stream():
                data.extend(chunk)
                if len(data) > self.max_body_bytes:
                    raise APIError(413, f"the request body is larger than {self.max_body_bytes} bytes",
                                   code="request_too_large")

        try:
            await asyncio.wait_for(read(), BODY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise APIError(408, f"the request body did not arrive within {BODY_TIMEOUT_S:.0f} s",
                           code="request_timeout") from None
        try:
            body = json.loads(bytes(data), parse_constant=_reject_constant)
        except (ValueError, RecursionError) as e:
            raise APIError(400, f"the request body is not valid JSON: {e}", code="invalid_json") from None
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object", code="invalid_json")
        model = model_of(body)
        if model is not None and model != self.model_id:
            raise APIError(404, f"The model '{model:.100}' does not exist: this server serves '{self.model_id}'",
                           param="model", code="model_not_found")
        return body

    # ------------------------------------------------------------------ routes
    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "model": self.model_id, "slots": self.batch.slots,
                             "active": self.batch.active, "queued": self.batch.queued})

    async def metrics_text(self, request: Request) -> Response:
        text = self.metrics.render(queued=self.batch.queued, active=self.batch.active, slots=self.batch.slots)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    def _model_card(self) -> dict:
        return {"id": self.model_id, "object": "model", "created": self.created, "owned_by": "kiln",
                "context_length": self.context}

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    async def model(self, request: Request) -> Response:
        name = request.path_params["model"]
        if name != self.model_id:
            raise APIError(404, f"The model '{name:.100}' does not exist", param="model", code="model_not_found")
        return JSONResponse(self._model_card())

    async def chat(self, request: Request) -> Response:
        body = await self._json(request)
        messages, s = parse_chat(body)
        try:
            prompt = self.batch.chat_prompt(messages)
        except kiln.NotSupported as e:
            raise APIError(400, f"this model has no chat template kiln knows ({e}); use /v1/completions",
                           param="messages", code="chat_not_supported") from None
        except kiln.InvalidArgument as e:
            raise bad("messages", str(e)) from None
        stops = s.stop + [t for t in self.chat_stops if t not in s.stop]
        return await self._generate(request, "chat", prompt, s, stops, param="messages")

    async def completions(self, request: Request) -> Response:
        body = await self._json(request)
        prompt, echo, s = parse_completion(body, int(self.config["vocab_size"]))
        if echo and s.logprobs >= 0:
            raise bad("echo", "'echo' with 'logprobs' is not supported (kiln does not score prompts)")
        if echo and not isinstance(prompt, str):
            prompt_text = await run_in_threadpool(self.tokenizer.decode, prompt)
        else:
            prompt_text = prompt if echo else ""
        return await self._generate(request, "text", prompt, s, s.stop, param="prompt", echo=prompt_text)

    # ------------------------------------------------------------------ generation
    def _encode(self, prompt) -> tuple:
        """(ids, the prompt's length in tokens with the BOS the engine prepends)."""
        ids = list(self.tokenizer.encode(prompt)) if isinstance(prompt, str) else list(prompt)
        extra = 1 if self._bos is not None and (not ids or ids[0] != self._bos) else 0
        return ids, len(ids) + extra

    def _guidance_tokenizer(self):
        with self._guidance_lock:
            if self._guidance is None and self._guidance_error is None:
                try:
                    self._guidance = constraints.Tokenizer(self.tokenizer, self.config)
                except Exception as e:  # noqa: BLE001 (then structured output answers 400 saying why)
                    log.warning("structured output is unavailable: %s", e)
                    self._guidance_error = f"{type(e).__name__}: {e}"
            return self._guidance

    async def _constraints(self, response_format, n: int) -> list:
        if response_format is None:
            return [None] * n
        if constraints.llguidance is None:
            raise bad("response_format", "structured output needs llguidance: pip install 'kiln[serve]'",
                      "not_supported")
        guidance = await run_in_threadpool(self._guidance_tokenizer)
        if guidance is None:
            raise bad("response_format", f"structured output is unavailable: {self._guidance_error}",
                      "not_supported")
        try:
            first = await run_in_threadpool(guidance.constraint, response_format)
            rest = [await run_in_threadpool(guidance.constraint, response_format) for _ in range(n - 1)]
        except ValueError as e:
            raise bad("response_format", str(e)) from None
        return [first, *rest]

    async def _generate(self, request: Request, kind: str, prompt, s: Sampling, stops: list, *, param: str,
                        echo: str = "") -> Response:
        try:
            ids, n_prompt = await run_in_threadpool(self._encode, prompt)
        except kiln.InvalidArgument as e:  # text that is not Unicode (a lone surrogate), ...
            raise bad(param, str(e)) from None
        if not ids:
            raise bad(param, f"the {'messages make' if kind == 'chat' else 'prompt is'} no tokens")
        if n_prompt >= self.context:
            what = "messages" if kind == "chat" else "prompt"
            raise APIError(400, f"This model's maximum context length is {self.context} tokens. However, your "
                           f"{what} resulted in {n_prompt} tokens. Please reduce the length of the {what}.",
                           param=param, code="context_length_exceeded")
        if s.max_tokens is not None and s.max_tokens > self.context:
            name = "max_tokens"
            raise bad(name, f"'{name}' is {s.max_tokens} but the model's context holds {self.context} tokens")
        room = self.context - n_prompt
        max_new = room if s.max_tokens is None else min(s.max_tokens, room)
        cons = await self._constraints(s.response_format, s.n)
        jobs = []
        for i in range(s.n):
            seed = -1 if s.seed is None else (s.seed + i) % (1 << 63)
            options = dict(max_new_tokens=max_new, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                           min_p=s.min_p, repetition_penalty=s.repetition_penalty, seed=seed, stop=stops or None,
                           # a finished document allows only the stop tokens: they must stop it
                           ignore_eos=s.ignore_eos and cons[i] is None, logprobs=s.logprobs)
            jobs.append((ids, options, cons[i]))  # ids: the engine need not encode it again
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        try:
            rids = self.worker.submit(jobs, loop, queue)
        except ShuttingDown as e:
            raise APIError(503, str(e), type="server_error", code="shutting_down") from None
        except QueueFull as e:
            raise APIError(429, str(e), type="rate_limit_error", code="queue_full", headers={"retry-after": "1"}) \
                from None
        except kiln.InvalidArgument as e:
            message = str(e)
            code = "context_length_exceeded" if "context" in message else "invalid_value"
            raise APIError(400, message, param=param if code != "invalid_value" else None, code=code) from None
        except kiln.KilnError as e:  # the engine could not take it (not the client's doing)
            log.warning("BatchRunner.submit failed: %s: %s", type(e).__name__, e)
            raise APIError(503, f"the engine cannot take the request: {type(e).__name__}: {e}",
                           type="server_error", code="engine_error") from None
        gen = _Generation(self, kind, s, rids, queue, n_prompt, echo)
        if s.stream:
            return SSEResponse(gen.stream(), gen.cancel)
        return await gen.whole(request)

    def token_text(self, token: int) -> str:
        text = self._token_text.get(token)
        if text is None:
            text = self.tokenizer.token_bytes(token).decode("utf-8", "replace")
            self._token_text[token] = text
        return text


class _Generation:
    """The choices of one HTTP request as their events arrive."""

    def __init__(self, server: Server, kind: str, s: Sampling, rids: list, queue, n_prompt: int, echo: str):
        self.server, self.kind, self.s, self.rids, self.queue = server, kind, s, rids, queue
        self.n_prompt = n_prompt
        self.echo = echo
        self.choices = [Choice(i) for i in range(len(rids))]
        self.open = len(rids)
        self.cancelled = False
        self.id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())

    def cancel(self) -> None:
        if not self.cancelled and self.open:
            self.cancelled = True
            self.server.worker.cancel(self.rids)
            self.queue.put_nowait((None, _DISCONNECT, None))

    async def _next(self):
        """(choice, event) of the next event; None once the client is gone."""
        index, ev, error = await self.queue.get()
        if ev is _DISCONNECT:
            return None
        if error is not None:
            raise APIError(500, f"the engine failed: {error}", type="server_error")
        c = self.choices[index]
        if ev.token >= 0:
            c.generated += 1
            if self.s.logprobs >= 0:
                c.tokens.append((ev.token, ev.logprob, list(ev.top_logprobs)))
        if ev.text:
            c.text.append(ev.text)
        if ev.finished and ev.finish_reason == "cancelled" and self.server.worker.stopping:
            self.open -= 1
            raise APIError(503, "the server is shutting down: the generation was stopped", type="server_error",
                           code="shutting_down")
        if ev.finished and ev.finish_reason == "error":  # the engine's forward call failed
            self.open -= 1
            raise APIError(500, f"the engine failed: {getattr(ev, 'error', '') or 'unknown error'}",
                           type="server_error", code="engine_error")
        if ev.finished:
            c.finish_reason = FINISH.get(ev.finish_reason, "stop")
            c.stats = dict(ev.stats or {})
            self.open -= 1
        return c, ev

    def usage(self) -> dict:
        prompt = max((int(c.stats.get("prompt_tokens", 0)) for c in self.choices), default=0) or self.n_prompt
        completion = sum(int(c.stats.get("generated_tokens", c.generated)) for c in self.choices)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    # ------------------------------------------------------------------ logprobs in OpenAI's two formats
    def _chat_logprobs(self, tokens) -> dict:
        text = self.server.token_text
        tok = self.server.tokenizer

        def entry(t, lp):
            return {"token": text(t), "logprob": _finite(lp), "bytes": list(tok.token_bytes(t))}

        return {"content": [dict(entry(t, lp), top_logprobs=[entry(i, l) for i, l in top])
                            for t, lp, top in tokens], "refusal": None}

    def _text_logprobs(self, tokens, offset: int) -> dict:
        text = self.server.token_text
        out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for t, lp, top in tokens:
            out["tokens"].append(text(t))
            out["token_logprobs"].append(_finite(lp))
            out["top_logprobs"].append({text(i): _finite(l) for i, l in top})
            out["text_offset"].append(offset)
            offset += len(text(t))
        return out

    # ------------------------------------------------------------------ one JSON answer
    async def whole(self, request: Request) -> Response:
        async def watch():
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    self.cancel()
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            while self.open:
                if await self._next() is None:
                    return Response(status_code=499)  # nobody reads it
        finally:
            watcher.cancel()
            if self.open:
                self.cancel()
        choices = []
        for c in self.choices:
            text = "".join(c.text)
            if self.kind == "chat":
                choice = {"index": c.index, "message": {"role": "assistant", "content": text, "refusal": None},
                          "logprobs": self._chat_logprobs(c.tokens) if self.s.logprobs >= 0 else None,
                          "finish_reason": c.finish_reason}
            else:
                choice = {"index": c.index, "text": self.echo + text,
                          "logprobs": self._text_logprobs(c.tokens, len(self.echo)) if self.s.logprobs >= 0 else None,
                          "finish_reason": c.finish_reason}
            choices.append(choice)
        body = {"id": self.id, "object": "chat.completion" if self.kind == "chat" else "text_completion",
                "created": self.created, "model": self.server.model_id,
                "system_fingerprint": self.server.fingerprint, "choices": choices, "usage": self.usage()}
        return JSONResponse(body)

    # ------------------------------------------------------------------ server-sent events
    def _chunk(self, choices: list, usage=False) -> bytes:
        body = {"id": self.id, "object": "chat.completion.chunk" if self.kind == "chat" else "text_completion",
                "created": self.created, "model": self.server.model_id,
                "system_fingerprint": self.server.fingerprint, "choices": choices}
        if self.s.include_usage:
            body["usage"] = self.usage() if usage else None
        return b"data: " + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"

    async def stream(self):
        try:
            if self.kind == "chat":
                yield self._chunk([{"index": c.index, "delta": {"role": "assistant", "content": ""},
                                    "logprobs": None, "finish_reason": None} for c in self.choices])
            elif self.echo:
                yield self._chunk([{"index": c.index, "text": self.echo, "logprobs": None, "finish_reason": None}
                                   for c in self.choices])
            offsets = [len(self.echo)] * len(self.choices)
            while self.open:
                try:
                    got = await self._next()
                except APIError as e:
                    yield b"data: " + json.dumps(e.body()).encode() + b"\n\n"
                    return
                if got is None:
                    return
                c, ev = got
                piece = ev.text
                lp = None
                if self.s.logprobs >= 0 and ev.token >= 0:
                    token = c.tokens[-1:]
                    if self.kind == "chat":
                        lp = self._chat_logprobs(token)
                    else:
                        lp = self._text_logprobs(token, offsets[c.index])
                offsets[c.index] += len(piece)
                if piece or lp is not None:
                    if self.kind == "chat":
                        choice = {"index": c.index, "delta": {"content": piece}, "logprobs": lp, "finish_reason": None}
                    else:
                        choice = {"index": c.index, "text": piece, "logprobs": lp, "finish_reason": None}
                    yield self._chunk([choice])
                if ev.finished:
                    if self.kind == "chat":
                        choice = {"index": c.index, "delta": {}, "logprobs": None, "finish_reason": c.finish_reason}
                    else:
                        choice = {"index": c.index, "text": "", "logprobs": None, "finish_reason": c.finish_reason}
                    yield self._chunk([choice])
            if self.s.include_usage:
                yield self._chunk([], usage=True)
            yield b"data: [DONE]\n\n"
        finally:
            if self.open:
                self.cancel()
