"""Structured output: `response_format` json_object / json_schema as a token mask per step, with
llguidance (https://github.com/guidance-ai/llguidance; PyPI `llguidance`, in kiln[serve]).

    tok = Tokenizer(batch.tokenizer, batch.config)           # once per server (about a second)
    c = tok.constraint({"type": "json_schema", "schema": {...}})   # ValueError: a schema it refuses
    batch.set_token_mask(rid, c.mask())                      # before the first token
    batch.set_token_mask(rid, c.advance(token))              # after each sampled token

The llguidance tokenizer is built from kiln's: every id's exact bytes (Tokenizer.token_bytes);
special tokens are prefixed with 0xFF, llguidance's mark for tokens no grammar text can match,
so only the end-of-sequence tokens (the config's eos_id and stop_ids) are ever allowed of them,
and those only where the grammar may end. Once the grammar has ended, the mask holds the stop
tokens only. Masks are llguidance's bitmask layout, which BatchRunner.set_token_mask takes as is.
"""

from __future__ import annotations

import json

try:
    import llguidance
except ImportError:  # kiln serve checks at start and names the extra
    llguidance = None

# Compact JSON (no free whitespace): a small model left free to emit whitespace may never stop.
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


class _Wrapped:
    """What llguidance.TokenizerWrapper reads: tokens (bytes per id), eos/bos, special ids, tokenize."""

    def __init__(self, tokenizer, config):
        self._tok = tokenizer
        n = config.get("vocab_size", tokenizer.vocab_size)
        special = set(tokenizer.special_ids)
        tokens = []
        for i in range(n):
            if i >= tokenizer.vocab_size:
                tokens.append(b"")  # logits past the vocabulary: never allowed
            elif i in special:
                tokens.append(b"\xff" + tokenizer.token_bytes(i))
            else:
                tokens.append(tokenizer.token_bytes(i))
        self.tokens = tokens
        self.eos_token_id = config.get("eos_id", -1)
        bos = config.get("bos_id", -1)
        self.bos_token_id = bos if bos is not None and bos >= 0 else None
        self.special_token_ids = sorted(special)

    def __call__(self, text: bytes) -> list:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return list(self._tok.encode(text, parse_special=False))


class Tokenizer:
    """kiln's tokenizer as llguidance sees it, and the stop tokens a finished grammar allows."""

    def __init__(self, tokenizer, config: dict):
        if llguidance is None:
            raise ImportError("structured output needs llguidance: pip install 'kiln[serve]'")
        self.vocab_size = int(config.get("vocab_size", tokenizer.vocab_size))
        wrapped = _Wrapped(tokenizer, config)
        eos = [i for i in [config.get("eos_id", -1), *(config.get("stop_ids") or [])] if i is not None and i >= 0]
        self.stop_ids = sorted(set(eos))
        from llguidance import LLTokenizer, TokenizerWrapper

        self.ll = LLTokenizer(TokenizerWrapper(wrapped), n_vocab=self.vocab_size,
                              eos_token=self.stop_ids or None)
        self.words = (self.vocab_size + 31) // 32
        stop = bytearray(4 * self.words)
        for i in self.stop_ids:
            stop[4 * (i // 32) + (i % 32) // 8] |= 1 << (i % 8)
        self.stop_mask = bytes(stop)

    def grammar(self, response_format: dict) -> str:
        """The llguidance grammar of a response_format (json_object: any JSON object)."""
        if response_format["type"] == "json_object":
            schema = {"type": "object"}
        else:
            schema = response_format["schema"]
        try:
            return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=JSON_OPTIONS)
        except (ValueError, TypeError) as e:
            raise ValueError(f"the JSON schema is not usable: {e}") from None

    def constraint(self, response_format: dict) -> "Constraint":
        """A matcher for one request; ValueError when llguidance refuses the schema."""
        grammar = self.grammar(response_format)
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, self.ll)
        if is_error:
            raise ValueError(f"the JSON schema is not supported: {messages[0] if messages else 'invalid'}")
        return Constraint(self, llguidance.LLMatcher(self.ll, grammar, log_level=0))


class Constraint:
    def __init__(self, tokenizer: Tokenizer, matcher):
        self.tok = tokenizer
        self.matcher = matcher
        self.error: str | None = None
        if matcher.is_error():
            raise ValueError(f"the JSON schema is not supported: {matcher.get_error()}")

    def mask(self) -> bytes:
        """The tokens allowed next (when the grammar has ended or failed: the stop tokens only)."""
        m = self.matcher
        if m.is_error() or m.is_stopped():
            return self.tok.stop_mask
        # llguidance's bitmask may hold a word more than the vocabulary needs (its own extra token)
        return m.compute_bitmask()[:4 * self.tok.words]

    def advance(self, token: int) -> bytes:
        """Consumes the sampled token; returns the next mask."""
        if not self.matcher.consume_token(token):
            self.error = self.matcher.get_error()
        return self.mask()

    def stop_mask(self) -> bytes:
        return self.tok.stop_mask

    @property
    def finished(self) -> bool:
        return self.matcher.is_stopped() or self.matcher.is_accepting()
