"""One streaming /v1/completions request over a raw socket, recorded byte for byte: what a client receives
when the server behind it dies mid-stream (tests/engine/test_router_cut_stream.py).

An HTTP library would hide the facts that matter here: whether the chunked body ended with its terminating
zero-length chunk (RFC 9112 section 7.1: a body without it is incomplete), whether the events ended with
`data: [DONE]`, and whether the last choice carried a `finish_reason` (the OpenAI completions stream sets
it on the last choice; vLLM's server too). So the bytes are read as they come and parsed after.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

READ_BYTES = 65536
# finish_reason values of an answer that ran to its end; vLLM also sends "abort" and "error" (the pinned
# vLLM's vllm/v1/engine/__init__.py FINISH_REASON_STRINGS), which end a stream early.
COMPLETED = ("stop", "length", "repetition")


@dataclass
class Recorded:
    """What came back: the status line's code, the body's framing, the events and how the bytes ended."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False
    terminated: bool = False  # the chunked body's zero-length last chunk arrived
    events: int = 0  # `data:` events, [DONE] left out
    text_events: int = 0  # events with a choice
    last_finish_reason: str | None = None  # the last choice's finish_reason
    done: bool = False  # `data: [DONE]` arrived
    errors: list[str] = field(default_factory=list)  # error events in the stream
    ending: str = ""  # "closed" (the peer closed), "reset", "timed out" or "still open" (read to its end)
    text: str = ""
    seconds: float = 0.0
    tail: str = ""  # the body's last bytes as they came (framing included), for a report

    def finished(self) -> bool:
        """What a careful client calls a finished answer: 200, a last choice that completed (COMPLETED),
        [DONE] and, chunked, the body's terminating chunk."""
        framed = self.terminated or not self.chunked
        return self.status == 200 and self.last_finish_reason in COMPLETED and self.done and framed

    def clean_end(self) -> bool:
        """Whether a client that reads to the end without checking finish_reason (vllm bench serve, the pinned
        vLLM's benchmarks/lib/endpoint_request_func.py) takes it as a success: 200, a choice at least, no
        error event, a body framed to its end (aiohttp raises on a chunked body without its last chunk)."""
        framed = self.terminated or not self.chunked
        return self.status == 200 and self.text_events > 0 and not self.errors and framed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def stream(
    url: str, payload: dict[str, Any], after_events: int = 0, then: Callable[[], None] = lambda: None,
    timeout_s: float = 120.0,
) -> Recorded:  # fmt: skip
    """POST `payload` to url/v1/completions and read until the peer closes (or `timeout_s` passes with
    nothing read); `then()` runs once, as soon as `after_events` events with a choice have arrived."""
    parts = urlsplit(url)
    body = json.dumps(payload).encode()
    request = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    raw = bytearray()
    ran = False
    ending = "still open"
    started = time.monotonic()
    with socket.create_connection(
        (parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout_s
    ) as sock:
        sock.sendall(request)
        while True:
            try:
                data = sock.recv(READ_BYTES)
            except ConnectionResetError:
                ending = "reset"
                break
            except TimeoutError:
                ending = "timed out"
                break
            if not data:
                ending = "closed"
                break
            raw += data
            if not ran and parse(bytes(raw)).text_events >= after_events:
                ran = True
                then()
    recorded = parse(bytes(raw))
    recorded.ending = ending
    recorded.seconds = round(time.monotonic() - started, 2)
    return recorded


def parse(raw: bytes) -> Recorded:
    """The response in `raw` as far as it goes (it may stop anywhere)."""
    recorded = Recorded()
    head, separator, body = raw.partition(b"\r\n\r\n")
    if not separator:
        return recorded
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split()
    recorded.status = int(status[1]) if len(status) > 1 and status[1].isdigit() else None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        recorded.headers[name.strip().lower()] = value.strip()
    recorded.chunked = "chunked" in recorded.headers.get("transfer-encoding", "").lower()
    payload = _unchunk(body, recorded) if recorded.chunked else body
    recorded.tail = body[-300:].decode("utf-8", "replace")
    text: list[str] = []
    for line in payload.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            recorded.done = True
            continue
        recorded.events += 1
        try:
            event = json.loads(data)
        except ValueError:
            recorded.errors.append(f"not JSON: {data[:120]}")
            continue
        if "error" in event:
            recorded.errors.append(json.dumps(event["error"])[:300])
        choices = event.get("choices") or []
        if choices:
            recorded.text_events += 1
            recorded.last_finish_reason = choices[-1].get("finish_reason")
            text.extend(str(c.get("text") or "") for c in choices)
    recorded.text = "".join(text)
    return recorded


def _unchunk(body: bytes, recorded: Recorded) -> bytes:
    """The chunked body's data as far as whole chunks go; notes whether the terminating chunk came."""
    data = bytearray()
    rest = body
    while True:
        size_line, separator, rest = rest.partition(b"\r\n")
        if not separator:
            return bytes(data)
        try:
            size = int(size_line.split(b";")[0].strip() or b"x", 16)
        except ValueError:
            return bytes(data)
        if size == 0:
            recorded.terminated = True
            return bytes(data)
        if len(rest) < size:
            return bytes(data + rest)  # the chunk cut where the bytes stopped
        data += rest[:size]
        rest = rest[size + 2 :]
