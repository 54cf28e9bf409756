"""Prompts of a target length in tokens, never seen by any cache (each starts with a fresh nonce)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kvtier.podscripts import kvcheck

Tokenizer = Callable[[str], int]


def tokenize_counter(url: str, model: str, timeout: float = 30.0) -> Tokenizer:
    """Token counts from an engine's POST /tokenize (vLLM's OpenAI server; routers usually lack it)."""

    def count(prompt: str) -> int:
        answer = kvcheck.http_json(url.rstrip("/") + "/tokenize", {"model": model, "prompt": prompt}, timeout)
        if not isinstance(answer, dict) or not isinstance(answer.get("count"), int):
            raise kvcheck.CheckError(f"{url}/tokenize: no token count in {str(answer)[:120]}")
        return int(answer["count"])

    return count


def sized_prompt(tokens: int, count: Tokenizer | None, nonce: str | None = None) -> tuple[str, int, bool]:
    """(prompt, its token count, exact?). Without a tokenizer the count is an estimate (1 per word)."""
    nonce = nonce or uuid.uuid4().hex[:12]
    words = tokens
    if count is None:
        return kvcheck.long_prompt(words, nonce), tokens, False
    for _ in range(4):  # proportional correction converges in one or two steps
        prompt = kvcheck.long_prompt(words, nonce)
        actual = count(prompt)
        if abs(actual - tokens) <= max(2, tokens // 100):
            return prompt, actual, True
        words = max(2, round(words * tokens / actual))
    return prompt, actual, True


def extend(prompt: str, words: int, nonce: str) -> str:
    """The next turn of a conversation: the old text plus new words (the prefix stays the same)."""
    return prompt + " " + kvcheck.long_prompt(words, nonce)
