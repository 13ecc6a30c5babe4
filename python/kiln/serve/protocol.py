"""The OpenAI request bodies kiln serve accepts, checked field by field (docs/serving.md).

Every problem with what a client sent is an APIError (a 4xx answer with OpenAI's error body),
never an exception of another kind: the handlers turn nothing else into a response.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MAX_N = 16  # choices of one request
MAX_STOP = 4  # stop strings, as OpenAI
MAX_TOP_LOGPROBS = 20

# Fields of OpenAI's API that kiln accepts and does not act on (their value is still type-checked
# loosely: anything JSON). Unknown fields are ignored too.
IGNORED = ("user", "metadata", "store", "service_tier", "parallel_tool_calls", "logit_bias", "frequency_penalty",
           "presence_penalty", "modalities", "prediction", "reasoning_effort", "audio", "web_search_options",
           "best_of", "tool_choice")


class APIError(Exception):
    """An answer other than 200: the status and OpenAI's {"error": {message, type, param, code}}."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None,
                 headers=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(param: str, message: str, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
               dict: "an object"}


def _type_name(v) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


def get(body: dict, name: str, kind, default=None, *, minimum=None, maximum=None, exclusive_minimum=False,
        nullable=True):
    """body[name] checked: `kind` is bool, int, float (an int is accepted) or str; null is the default."""
    if name not in body or (body[name] is None and nullable):
        return default
    v = body[name]
    ok = (isinstance(v, bool) if kind is bool else
          isinstance(v, int) and not isinstance(v, bool) if kind is int else
          isinstance(v, (int, float)) and not isinstance(v, bool) if kind is float else
          isinstance(v, kind))
    if kind is int and isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        v, ok = int(v), True
    if not ok:
        raise bad(name, f"'{name}' must be {_TYPE_NAMES[kind]}, not {_type_name(v)}", "invalid_type")
    if kind is float:
        v = float(v)
        if not math.isfinite(v):
            raise bad(name, f"'{name}' must be a finite number")
    if minimum is not None and (v <= minimum if exclusive_minimum else v < minimum):
        raise bad(name, f"'{name}' must be {'>' if exclusive_minimum else '>='} {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise bad(name, f"'{name}' must be <= {maximum}, got {v}")
    return v


def _is_unicode(s: str) -> bool:
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _stop(body: dict) -> list:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise bad("stop", "'stop' must be a string or an array of strings", "invalid_type")
    if len(stop) > MAX_STOP:
        raise bad("stop", f"'stop' holds at most {MAX_STOP} strings, got {len(stop)}")
    for i, s in enumerate(stop):
        if not _is_unicode(s):
            raise bad("stop", f"stop[{i}] is not valid Unicode text (a lone surrogate)")
    return [s for s in stop if s]


@dataclass
class Sampling:
    """What the request asks of the sampler, in kiln's terms (BatchRunner.submit's options)."""

    n: int = 1
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list = field(default_factory=list)
    logprobs: int = -1  # -1 none, else the number of top logprobs
    stream: bool = False
    include_usage: bool = False
    ignore_eos: bool = False
    response_format: dict | None = None  # {"type": "json_object"} or {"type": "json_schema", "schema": {...}}


def _common(body: dict, s: Sampling) -> None:
    s.n = get(body, "n", int, 1, minimum=1, maximum=MAX_N)
    s.temperature = get(body, "temperature", float, 1.0, minimum=0, maximum=2)
    s.top_p = get(body, "top_p", float, 1.0, minimum=0, maximum=1, exclusive_minimum=True)
    s.top_k = get(body, "top_k", int, 0, minimum=0, maximum=2**31 - 1)
    s.min_p = get(body, "min_p", float, 0.0, minimum=0, maximum=1)
    s.repetition_penalty = get(body, "repetition_penalty", float, 1.0, minimum=0, exclusive_minimum=True,
                               maximum=1e6)
    s.seed = get(body, "seed", int, None, minimum=-(2**63), maximum=2**63 - 1)
    s.stop = _stop(body)
    s.stream = get(body, "stream", bool, False)
    s.ignore_eos = get(body, "ignore_eos", bool, False)
    opts = body.get("stream_options")
    if opts is not None:
        if not isinstance(opts, dict):
            raise bad("stream_options", "'stream_options' must be an object", "invalid_type")
        s.include_usage = get(opts, "include_usage", bool, False)
        if not s.stream:
            raise bad("stream_options", "'stream_options' is only allowed when 'stream' is true")
    for name in ("frequency_penalty", "presence_penalty"):
        get(body, name, float, 0.0, minimum=-2, maximum=2)
    if body.get("logit_bias") is not None and not isinstance(body["logit_bias"], dict):
        raise bad("logit_bias", "'logit_bias' must be an object", "invalid_type")
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise bad("user", "'user' must be a string", "invalid_type")
    best_of = get(body, "best_of", int, None, minimum=1, maximum=MAX_N)
    if best_of is not None and best_of != s.n:
        raise bad("best_of", "'best_of' other than 'n' is not supported")


def model_of(body: dict):
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("model", "'model' must be a string", "invalid_type")
    return model


def _content(i: int, content) -> str:
    """A message's content: a string, or an array of {"type": "text", "text": ...} parts."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise bad(f"messages[{i}].content[{j}]", "a content part must be an object with a 'type'",
                          "invalid_type")
            if part["type"] != "text":
                raise bad(f"messages[{i}].content[{j}].type",
                          f"content parts of type '{part['type']:.40}' are not supported (only 'text')")
            if not isinstance(part.get("text"), str):
                raise bad(f"messages[{i}].content[{j}].text", "a text part's 'text' must be a string",
                          "invalid_type")
            texts.append(part["text"])
        return "".join(texts)
    raise bad(f"messages[{i}].content", "a message's 'content' must be a string or an array of parts",
              "invalid_type")


ROLES = ("system", "developer", "user", "assistant", "tool")


def parse_chat(body: dict) -> tuple:
    """(messages as [(role, content)], Sampling) of a /v1/chat/completions body."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise bad("messages", "'messages' is required: an array of messages" if messages is None else
                  f"'messages' must be an array, not {_type_name(messages)}",
                  "missing_required_parameter" if messages is None else "invalid_type")
    if not messages:
        raise bad("messages", "'messages' must hold at least one message")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise bad(f"messages[{i}]", "a message must be an object", "invalid_type")
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise bad(f"messages[{i}].role", f"a message's 'role' must be one of {', '.join(ROLES)}")
        out.append(("system" if role == "developer" else role, _content(i, m.get("content"))))
    s = Sampling()
    _common(body, s)
    if body.get("tools"):
        raise bad("tools", "tools (function calling) are not supported by kiln serve")
    a = get(body, "max_tokens", int, None, minimum=1)
    b = get(body, "max_completion_tokens", int, None, minimum=1)
    s.max_tokens = b if b is not None else a
    if get(body, "logprobs", bool, False):
        s.logprobs = get(body, "top_logprobs", int, 0, minimum=0, maximum=MAX_TOP_LOGPROBS)
    elif get(body, "top_logprobs", int, None, minimum=0, maximum=MAX_TOP_LOGPROBS):
        raise bad("top_logprobs", "'top_logprobs' needs 'logprobs' set to true")
    s.response_format = _response_format(body.get("response_format"))
    return out, s


def _response_format(rf):
    if rf is None:
        return None
    if not isinstance(rf, dict) or not isinstance(rf.get("type"), str):
        raise bad("response_format", "'response_format' must be an object with a 'type'", "invalid_type")
    kind = rf["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict):
            raise bad("response_format.json_schema", "'json_schema' must be an object with a 'schema'",
                      "invalid_type")
        schema = js.get("schema", {})
        if not isinstance(schema, (dict, bool)):
            raise bad("response_format.json_schema.schema", "'schema' must be a JSON Schema object",
                      "invalid_type")
        return {"type": "json_schema", "schema": schema}
    raise bad("response_format.type", f"'response_format.type' must be text, json_object or json_schema, "
              f"not '{kind:.40}'")


def parse_completion(body: dict, vocab_size: int) -> tuple:
    """(prompt: str or [ids], echo, Sampling) of a /v1/completions body. A list of several prompts is
    refused (400): send one request per prompt (or use 'n')."""
    prompt = body.get("prompt")
    if prompt is None:
        raise bad("prompt", "'prompt' is required", "missing_required_parameter")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, list):
        if prompt and all(isinstance(p, (str, list)) for p in prompt):
            raise bad("prompt", "a list of several prompts is not supported: send one request per prompt")
        for i, t in enumerate(prompt):
            if not isinstance(t, int) or isinstance(t, bool):
                raise bad("prompt", f"'prompt' must be a string or an array of token ids; prompt[{i}] is "
                          f"{_type_name(t)}", "invalid_type")
            if not 0 <= t < vocab_size:
                raise bad("prompt", f"prompt[{i}] = {t} is not a token id (the vocabulary has {vocab_size})")
    elif not isinstance(prompt, str):
        raise bad("prompt", f"'prompt' must be a string or an array of token ids, not {_type_name(prompt)}",
                  "invalid_type")
    if len(prompt) == 0:
        raise bad("prompt", "'prompt' is empty")
    if body.get("suffix"):
        raise bad("suffix", "'suffix' is not supported")
    s = Sampling()
    _common(body, s)
    s.max_tokens = get(body, "max_tokens", int, 16, minimum=1)
    lp = get(body, "logprobs", int, None, minimum=0, maximum=MAX_TOP_LOGPROBS)
    s.logprobs = -1 if lp is None else lp
    echo = get(body, "echo", bool, False)
    s.response_format = _response_format(body.get("response_format"))
    return prompt, echo, s
