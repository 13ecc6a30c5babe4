"""kiln serve (docs/serving.md) through the official `openai` client, against servers this module
starts as users do (`python -m kiln serve ...` on a free loopback port): chat and completions,
streaming or not, n > 1, stop strings, seeds, structured output, every error answer, and many
clients at once with cancellations. The model: SmolLM2's first 2 layers (its text means nothing,
but its tokenizer and chat template are the real ones), exported with a context of 256.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

CONTEXT = 256
SLOTS = 4


@functools.lru_cache(maxsize=None)
def _export_has_slots() -> bool:
    proc = subprocess.run([sys.executable, "-m", "kiln", "llm", "export", "--help"], capture_output=True, text=True,
                          timeout=120)
    return "--slots" in proc.stdout


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """The test model, with SLOTS slots (BatchRunner's KV caches: `kiln llm export --slots`)."""
    from zoo import smollm2

    path = tmp_path_factory.mktemp("serve") / "tiny.kiln"
    slots = ["--slots", str(SLOTS)] if _export_has_slots() else []
    proc = subprocess.run([sys.executable, "-m", "kiln", "llm", "export", str(smollm2.gguf_path()), "-o", str(path),
                           "--dtype", "float32", "--context", str(CONTEXT), "--max-tokens-per-call", "16",
                           "--layers", "2", *slots], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, program, *args):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, KILN_NUM_THREADS="1")
        env.pop("KILN_API_KEY", None)
        self.log = open(program.parent / f"serve-{self.port}.log", "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "kiln", "serve", str(program), "--port", str(self.port),
                                      "--threads", "1", *map(str, args)], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env)
        deadline = time.monotonic() + 120
        while True:
            assert self.proc.poll() is None, f"kiln serve exited: {self.output()}"
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            assert time.monotonic() < deadline, f"kiln serve did not start: {self.output()}"
            time.sleep(0.2)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def client(self, api_key="none", **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=120, **kw)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def health(self) -> dict:
        with urllib.request.urlopen(self.url + "/health", timeout=10) as r:
            return json.loads(r.read())


@pytest.fixture(scope="module")
def server(program):
    s = ServerProcess(program, "--max-queue", 64)  # every slot the file has
    yield s
    output = s.output()
    s.stop()
    assert s.proc.returncode in (0, -15), output
    assert "Traceback" not in output and "internal error" not in output, output


@pytest.fixture(scope="module")
def model(server):
    return server.client().models.list().data[0].id


def metrics(server, api_key=None) -> dict:
    """{'name{labels}': value} of GET /metrics."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    r = httpx.get(server.url + "/metrics", headers=headers, timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def wait_idle(server):
    deadline = time.monotonic() + 60
    while True:
        h = server.health()
        if h["active"] == 0 and h["queued"] == 0:
            return h
        assert time.monotonic() < deadline, h
        time.sleep(0.1)


def post(server, path, body, headers=None, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(server.url + path, content=data, headers={"content-type": "application/json", **(headers or {})},
                      timeout=60)


def assert_error(r, status, code=None, param=None):
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    if param is not None:
        assert body["error"]["param"] == param, body
    return body["error"]


MESSAGES = [{"role": "user", "content": "Tell me about the sea."}]


# ---------------------------------------------------------------------------------------------- basics


def test_models_and_health(server, model):
    h = server.health()
    assert h["status"] == "ok" and h["slots"] == (SLOTS if _export_has_slots() else 1)
    card = server.client().models.retrieve(model)
    assert card.id == model and card.object == "model"


def test_chat(server, model):
    r = server.client().chat.completions.create(model=model, messages=MESSAGES, max_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    (choice,) = r.choices
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # greedy: the same again
    again = server.client().chat.completions.create(model=model, messages=MESSAGES, max_tokens=12, temperature=0)
    assert again.choices[0].message.content == choice.message.content


def test_chat_stream_matches_whole(server, model):
    client = server.client()
    whole = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=20, temperature=0)
    chunks = list(client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=20, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_sse_wire_format(server, model):
    with httpx.stream("POST", server.url + "/v1/completions", timeout=60,
                      json={"model": model, "prompt": "The sea is", "max_tokens": 5, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    for e in events[:-2]:
        assert e.startswith("data: {")
        assert json.loads(e[len("data: "):])["object"] == "text_completion"


def test_completions(server, model):
    client = server.client()
    r = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 8
    text = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True))
    assert text == r.choices[0].text
    # token ids as the prompt: the same text
    from kiln.llm import Tokenizer

    from zoo import smollm2

    ids = list(Tokenizer.from_gguf(str(smollm2.gguf_path())).encode("The capital of France is"))
    by_ids = client.completions.create(model=model, prompt=ids, max_tokens=8, temperature=0)
    assert by_ids.choices[0].text == r.choices[0].text
    echo = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0,
                                     echo=True)
    assert echo.choices[0].text == "The capital of France is" + r.choices[0].text


def test_max_tokens_and_length(server, model):
    r = server.client().completions.create(model=model, prompt="Once", max_tokens=3, temperature=0,
                                           extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3
    r = server.client().chat.completions.create(model=model, messages=MESSAGES, max_completion_tokens=2,
                                                temperature=0, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 2


def test_stop_strings(server, model):
    client = server.client()
    kw = dict(model=model, prompt="Once upon a time", max_tokens=30, temperature=0, extra_body={"ignore_eos": True})
    text = client.completions.create(**kw).choices[0].text
    assert len(text) > 10
    stop = text[5:8]
    cut = text[:text.index(stop)]
    r = client.completions.create(**kw, stop=stop)
    assert r.choices[0].text == cut and r.choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].text for c in client.completions.create(**kw, stop=[stop, "zzzz"], stream=True))
    assert streamed == cut


def test_seeds_and_n(server, model):
    client = server.client()
    kw = dict(model=model, messages=MESSAGES, max_tokens=16, temperature=1.0, extra_body={"top_k": 50})
    one = [client.chat.completions.create(**kw, seed=1000 + i).choices[0].message.content for i in range(3)]
    assert client.chat.completions.create(**kw, seed=1000).choices[0].message.content == one[0]
    r = client.chat.completions.create(**kw, seed=1000, n=3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.message.content for c in r.choices] == one  # choice i: seed + i
    assert r.usage.completion_tokens == sum(
        client.chat.completions.create(**kw, seed=1000 + i).usage.completion_tokens for i in range(3))
    # streamed: the choices interleave, each adds up to its text
    texts = ["", "", ""]
    for c in client.chat.completions.create(**kw, seed=1000, n=3, stream=True):
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
    assert texts == one


def test_seed_while_others_run(server, model):
    client = server.client()
    kw = dict(model=model, prompt="The sea is", max_tokens=24, temperature=0.9, seed=77,
              extra_body={"ignore_eos": True})
    alone = client.completions.create(**kw).choices[0].text
    results, errors = [], []

    def other(i):
        try:
            server.client().completions.create(model=model, prompt=f"Number {i} is", max_tokens=40,
                                               temperature=1.0, seed=i, extra_body={"ignore_eos": True})
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=other, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    results.append(client.completions.create(**kw).choices[0].text)
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert results == [alone]


def test_logprobs(server, model):
    client = server.client()
    r = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=5, temperature=0, logprobs=True,
                                       top_logprobs=3, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 5
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].token == e.token  # greedy: the most likely one
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token
    r = client.completions.create(model=model, prompt="The sea is", max_tokens=4, temperature=0, logprobs=2,
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 4
    assert lp.text_offset[0] == 0 and "".join(lp.tokens) == r.choices[0].text
    assert all(len(t) == 2 for t in lp.top_logprobs)


# ---------------------------------------------------------------------------------------------- structured output

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                      "address": {"type": "object",
                                                  "properties": {"city": {"type": "string", "maxLength": 10},
                                                                 "zip": {"type": "integer", "minimum": 0,
                                                                         "maximum": 99999}},
                                                  "required": ["city", "zip"], "additionalProperties": False}},
     "required": ["name", "address"], "additionalProperties": False},
    {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"}},
     "required": ["color", "ok"], "additionalProperties": False},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1,
                                               "maxItems": 4}},
     "required": ["tags"], "additionalProperties": False},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=["nested", "enum", "array"])
def test_json_schema(server, model, schema):
    client = server.client()
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    for seed in (1, 2):
        r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Answer in JSON."}],
                                           response_format=rf, max_tokens=120, temperature=0.7, seed=seed)
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        jsonschema.validate(json.loads(r.choices[0].message.content), schema)
    text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "JSON"}], response_format=rf, max_tokens=120,
        temperature=0.7, seed=3, stream=True))
    jsonschema.validate(json.loads(text), schema)


def test_json_object(server, model):
    r = server.client().completions.create(model=model, prompt="{", max_tokens=150, temperature=0.5, seed=5,
                                           extra_body={"response_format": {"type": "json_object"}})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].text), dict)
    else:  # ran out of tokens inside the object: what was produced is still a prefix of JSON
        assert r.choices[0].text.startswith("{")


def test_bad_schema(server, model):
    r = post(server, "/v1/chat/completions", {"model": model, "messages": MESSAGES, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": 3}}}})
    assert_error(r, 400, param="response_format")


# ---------------------------------------------------------------------------------------------- errors


def test_client_errors(server, model):
    chat = "/v1/chat/completions"
    assert_error(post(server, chat, None, raw=b"{not json"), 400, code="invalid_json")
    assert_error(post(server, chat, None, raw=b"[1, 2]"), 400)
    assert_error(post(server, chat, None, raw=b"\xff\xfe"), 400)
    assert_error(post(server, chat, None, raw=b'{"messages": NaN}'), 400)
    assert_error(post(server, chat, {"model": model}), 400, param="messages")
    assert_error(post(server, chat, {"model": model, "messages": "hi"}), 400, param="messages")
    assert_error(post(server, chat, {"model": model, "messages": [{"role": "robot", "content": "x"}]}), 400)
    assert_error(post(server, chat, {"model": model, "messages": [{"role": "user", "content": 5}]}), 400)
    for field, value in (("temperature", "hot"), ("temperature", 3), ("top_p", 0), ("n", 0), ("n", 1.5),
                         ("max_tokens", -1), ("max_tokens", "10"), ("stop", 5), ("stop", ["a"] * 5), ("seed", "x"),
                         ("stream", "yes"), ("top_k", -1), ("min_p", 2), ("repetition_penalty", 0),
                         ("logprobs", 1), ("top_logprobs", 50), ("response_format", {"type": "xml"}),
                         ("max_tokens", CONTEXT + 1)):
        err = assert_error(post(server, chat, {"model": model, "messages": MESSAGES, field: value}), 400)
        assert err["param"] in (field, "response_format.type"), (field, err)
    assert_error(post(server, chat, {"model": model, "messages": MESSAGES, "stream_options": {"include_usage": True}}),
                 400, param="stream_options")
    assert_error(post(server, "/v1/completions", {"model": model, "prompt": ["a", "b"]}), 400, param="prompt")
    assert_error(post(server, "/v1/completions", {"model": model, "prompt": [1, -5]}), 400, param="prompt")
    assert_error(post(server, "/v1/completions", {"model": model, "prompt": ""}), 400, param="prompt")
    assert_error(post(server, "/v1/completions", {"model": model, "prompt": {"a": 1}}), 400, param="prompt")
    # text that is not Unicode (JSON may escape a lone surrogate)
    assert_error(post(server, "/v1/completions", None, raw=b'{"prompt": "a\\ud800b"}'), 400, param="prompt")
    assert_error(post(server, chat, None, raw=b'{"messages": [{"role": "user", "content": "\\udfff"}]}'), 400)
    assert_error(post(server, "/v1/completions", None, raw=b'{"prompt": "a", "stop": ["\\ud800"]}'), 400)
    assert_error(post(server, chat, None, raw=b'{"messages": [' + b'[' * 100000 + b']' * 100000 + b']}'), 400)
    # accepted and ignored: fields OpenAI defines that kiln does not use, unknown fields
    r = post(server, chat, {"model": model, "messages": MESSAGES, "max_tokens": 2, "user": "u1",
                            "presence_penalty": 0.5, "metadata": {"a": "b"}, "something_new": [1, 2]})
    assert r.status_code == 200, r.text
    # the model: another name is 404
    assert_error(post(server, chat, {"model": "gpt-4o", "messages": MESSAGES}), 404, code="model_not_found")
    assert_error(httpx.get(server.url + "/v1/nothing", timeout=10), 404)


def test_random_bodies_never_500(server, model):
    """Each known field given values of every JSON type (a fixed random sample): 200 or a 4xx, never more."""
    rng = random.Random(7)
    values = [None, True, False, 0, -1, 1, 2, 2.5, -0.5, 1e308, 2**70, "", "x", "\u00e9\U0001f600", [], {}, [1],
              ["a"], [[1]], {"a": 1}, {"type": "json_object"}, {"type": "text"}, [{"role": "user", "content": "x"}]]
    fields = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n",
              "stop", "seed", "stream", "stream_options", "logprobs", "top_logprobs", "response_format", "top_k",
              "min_p", "repetition_penalty", "echo", "suffix", "user", "logit_bias", "tools", "best_of",
              "presence_penalty"]
    seen = set()
    for i in range(120):
        route = "/v1/chat/completions" if i % 2 else "/v1/completions"
        body = {"model": model, "max_tokens": 2} if rng.random() < 0.8 else {}
        if route.startswith("/v1/chat"):
            body["messages"] = MESSAGES
        else:
            body["prompt"] = "Hi"
        for name in rng.sample(fields, rng.randint(1, 4)):
            body[name] = rng.choice(values)
        if isinstance(body.get("n"), int) and not isinstance(body["n"], bool) and body["n"] > 2:
            body["n"] = 2
        for key in ("max_tokens", "max_completion_tokens"):  # bounded work
            if isinstance(body.get(key), (int, float)) and not isinstance(body[key], bool) and body[key] > 4:
                body[key] = 4
        body.setdefault("max_tokens", 2)
        r = post(server, route, body)
        assert r.status_code < 500, (body, r.text)
        seen.add(r.status_code)
        if r.status_code != 200:
            assert_error(r, r.status_code)
    assert 200 in seen and 400 in seen
    assert server.health()["status"] == "ok"


def test_prompt_too_long(server, model):
    long = "word " * (CONTEXT + 10)
    err = assert_error(post(server, "/v1/completions", {"model": model, "prompt": long}), 400,
                       code="context_length_exceeded")
    assert str(CONTEXT) in err["message"]
    body = {"model": model, "messages": [{"role": "user", "content": long}]}
    assert_error(post(server, "/v1/chat/completions", body), 400, code="context_length_exceeded")
    with pytest.raises(openai.BadRequestError) as e:
        server.client().completions.create(model=model, prompt=long)
    assert e.value.code == "context_length_exceeded"


def test_body_too_large(server, model):
    big = json.dumps({"model": model, "messages": [{"role": "user", "content": "x" * (1 << 20)}]}).encode()
    assert_error(post(server, "/v1/chat/completions", None, raw=big), 413)

    def chunked():  # no content-length: the limit holds while reading
        for _ in range(20):
            yield b" " * 65536

    r = httpx.post(server.url + "/v1/chat/completions", content=chunked(), timeout=60)
    assert_error(r, 413)


def test_nothing_stops_the_server(server, model):
    """Junk on the socket, a client that sends half a body and leaves: the server still answers."""
    for junk in (b"GARBAGE\r\n\r\n", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(junk)
    assert server.health()["status"] == "ok"
    r = server.client().completions.create(model=model, prompt="Hi", max_tokens=2)
    assert r.choices[0].text is not None
    deadline = time.monotonic() + 30
    while not any('status="499"' in k for k in metrics(server)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the half body's request ends when the server sees the connection closed
    assert not [k for k in metrics(server) if re.search(r'status="5\d\d"', k)]


def test_disconnect_frees_the_slot(server, model):
    """A client that leaves before its (non-streamed) answer: its generation is cancelled."""
    before = metrics(server)
    body = json.dumps({"model": model, "prompt": "The sea", "max_tokens": CONTEXT - 8,
                       "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        deadline = time.monotonic() + 60
        while metrics(server)["kiln_active_slots"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
    wait_idle(server)
    after = metrics(server)
    key = 'kiln_generations_total{finish_reason="cancelled"}'
    assert after.get(key, 0) - before.get(key, 0) == 1
    assert after['kiln_requests_total{route="/v1/completions",status="499"}'] >= 1


@pytest.fixture(scope="module")
def guarded(program):
    s = ServerProcess(program, "--slots", 1, "--max-queue", 1, "--api-key", "sekret", "--ctx", CONTEXT // 2)
    yield s
    s.stop()


def test_api_key(guarded):
    assert guarded.health()["status"] == "ok"  # /health needs no key
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic sekret"}):
        assert_error(httpx.get(guarded.url + "/v1/models", headers=headers, timeout=10), 401, code="invalid_api_key")
        assert_error(httpx.get(guarded.url + "/metrics", headers=headers, timeout=10), 401)
        assert_error(post(guarded, "/v1/completions", {"prompt": "x"}, headers=headers), 401)
    with pytest.raises(openai.AuthenticationError):
        guarded.client(api_key="wrong").models.list()
    assert guarded.client(api_key="sekret").models.list().data


def test_ctx(guarded):
    """--ctx: a request's context (prompt and answer) smaller than the program's."""
    key = {"authorization": "Bearer sekret"}
    ctx = CONTEXT // 2
    card = httpx.get(guarded.url + "/v1/models", headers=key, timeout=10).json()["data"][0]
    assert card["context_length"] == ctx
    err = assert_error(post(guarded, "/v1/completions", {"prompt": "word " * (ctx + 2)}, headers=key), 400,
                       code="context_length_exceeded")
    assert str(ctx) in err["message"]
    assert_error(post(guarded, "/v1/completions", {"prompt": "Hi", "max_tokens": ctx + 1}, headers=key), 400,
                 param="max_tokens")
    r = post(guarded, "/v1/completions", {"prompt": "word " * (ctx - 6), "max_tokens": ctx, "ignore_eos": True},
             headers=key)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    assert usage["total_tokens"] <= ctx and r.json()["choices"][0]["finish_reason"] == "length"


def test_queue_full(guarded):
    """One slot, a queue of one: a third request while two run is answered 429 at once."""
    client = guarded.client(api_key="sekret")
    model = client.models.list().data[0].id
    streams, refused = [], None
    try:
        for _ in range(6):
            try:
                s = client.completions.create(model=model, prompt="The sea", max_tokens=CONTEXT // 2 - 8, stream=True,
                                              extra_body={"ignore_eos": True})
            except openai.RateLimitError as e:
                refused = e
                break
            streams.append(s)
        assert refused is not None and len(streams) >= 2
        assert refused.status_code == 429 and refused.code == "queue_full"
        assert refused.response.headers["retry-after"] == "1"
    finally:
        for s in streams:
            s.close()
    wait_idle(guarded)
    assert client.completions.create(model=model, prompt="Hi", max_tokens=2).choices


# ---------------------------------------------------------------------------------------------- many clients


def test_concurrent_with_cancellations(server, model):
    """32 requests from 8 threads, a third closed early: the others answered, every slot free after,
    and /metrics counts them all."""
    before = metrics(server)
    rng = random.Random(1234)
    plans = [(i, rng.choice(["stream", "whole", "cancel"]), rng.randint(1, 4)) for i in range(32)]
    results, errors = {}, []

    def run(items):
        client = server.client()
        for i, how, k in items:
            try:
                kw = dict(model=model, messages=[{"role": "user", "content": f"Request {i}"}], max_tokens=24,
                          temperature=0.8, seed=i, extra_body={"ignore_eos": True})
                if how == "whole":
                    r = client.chat.completions.create(**kw)
                    results[i] = (how, r.choices[0].message.content, r.usage.completion_tokens)
                elif how == "stream":
                    text = "".join(c.choices[0].delta.content or "" for c in
                                   client.chat.completions.create(**kw, stream=True) if c.choices)
                    results[i] = (how, text, None)
                else:
                    stream = client.chat.completions.create(**kw, stream=True)
                    for n, _ in enumerate(stream):
                        if n >= k:
                            break
                    stream.close()
                    results[i] = (how, None, None)
            except Exception as e:  # noqa: BLE001
                errors.append((i, how, repr(e)))

    threads = [threading.Thread(target=run, args=(plans[t::8],)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert len(results) == 32
    wait_idle(server)
    after = metrics(server)

    def delta(key):
        return after.get(key, 0) - before.get(key, 0)

    assert delta('kiln_requests_total{route="/v1/chat/completions",status="200"}') == 32
    finished = sum(delta(k) for k in after if k.startswith("kiln_generations_total"))
    assert finished == 32
    cancelled = sum(1 for how, _, _ in results.values() if how == "cancel")
    assert delta('kiln_generations_total{finish_reason="cancelled"}') <= cancelled
    assert delta('kiln_generations_total{finish_reason="max_new_tokens"}') >= 32 - cancelled
    whole_tokens = sum(n for how, _, n in results.values() if how == "whole")
    assert delta("kiln_completion_tokens_total") >= whole_tokens
    assert after["kiln_active_slots"] == 0 and after["kiln_queue_depth"] == 0
    assert delta("kiln_time_to_first_token_seconds_count") >= 32 - cancelled
    # the answers are those each request gets alone (same seed)
    client = server.client()
    for i, (how, text, _) in sorted(results.items())[:6]:
        if how != "cancel":
            alone = client.chat.completions.create(model=model, messages=[{"role": "user", "content": f"Request {i}"}],
                                                   max_tokens=24, temperature=0.8, seed=i,
                                                   extra_body={"ignore_eos": True})
            assert alone.choices[0].message.content == text


def test_metrics_format(server):
    m = metrics(server)
    assert any(re.match(r'kiln_requests_total\{route="[^"]+",status="\d{3}"\}', k) for k in m)
    for name in ("kiln_prompt_tokens_total", "kiln_completion_tokens_total", "kiln_queue_depth", "kiln_active_slots",
                 'kiln_time_to_first_token_seconds_bucket{le="+Inf"}', "kiln_inter_token_latency_seconds_count"):
        assert name in m, name


def test_missing_extra(tmp_path, program):
    """Without Starlette/uvicorn: one line naming the extra."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass B:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name in ('starlette', 'uvicorn'):\n            raise ImportError(name)\n"
        "sys.meta_path.insert(0, B())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "kiln", "serve", str(program)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 1
    assert "pip install 'kiln[serve]'" in proc.stderr and "Traceback" not in proc.stderr


def test_shutdown_ends_streams(program):
    """SIGTERM: the generations in flight end at once, their clients told (an error event), then it exits."""
    s = ServerProcess(program, "--slots", 1)
    try:
        client = s.client()
        model = client.models.list().data[0].id
        stream = client.completions.create(model=model, prompt="The sea", max_tokens=CONTEXT - 8, stream=True,
                                           extra_body={"ignore_eos": True})
        next(iter(stream))
        s.proc.terminate()
        with pytest.raises(openai.APIError, match="shutting down"):
            for _ in stream:
                pass
        assert s.proc.wait(timeout=60) in (0, -15)  # uvicorn re-raises SIGTERM once it has shut down
    finally:
        s.stop()
