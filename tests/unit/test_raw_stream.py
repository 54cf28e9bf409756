"""The raw stream recorder (kvtier.engine_rig.raw_stream) on canned responses from a loopback socket: a
finished stream, and the ways one can stop short (tests/engine/test_router_cut_stream.py uses it on the
real router)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kvtier.engine_rig import raw_stream

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def event(text: str, finish: str | None = None) -> bytes:
    line = b"data: " + json.dumps({"choices": [{"text": text, "finish_reason": finish}]}).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(line), line)


@contextmanager
def serving(response: bytes) -> Iterator[str]:
    """A server that answers one request with `response` and closes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(response)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        thread.join(5)
        server.close()


def test_a_finished_stream_is_told_from_one_that_stopped_short() -> None:
    done = b"%x\r\n%s\r\n" % (len(b"data: [DONE]\n\n"), b"data: [DONE]\n\n")
    with serving(HEAD + event("a") + event("b", "length") + done + b"0\r\n\r\n") as url:
        finished = raw_stream.stream(url, {"stream": True}, timeout_s=10)
    assert (
        finished.finished() and finished.clean_end() and finished.text == "ab" and finished.ending == "closed"
    )
    assert (finished.status, finished.text_events, finished.last_finish_reason) == (200, 2, "length")
    # Closed after two text events: no finish_reason, no [DONE], no terminating chunk.
    seen = []
    with serving(HEAD + event("a") + event("b")) as url:
        cut = raw_stream.stream(
            url, {"stream": True}, after_events=1, then=lambda: seen.append(1), timeout_s=10
        )
    assert not cut.finished() and not cut.clean_end() and seen == [1] and cut.text == "ab"
    assert (cut.terminated, cut.done, cut.last_finish_reason, cut.ending) == (False, False, None, "closed")
    # Framed cleanly, [DONE] included, but the last choice never finished: a careful client fails it.
    with serving(HEAD + event("a") + done + b"0\r\n\r\n") as url:
        clean = raw_stream.stream(url, {"stream": True}, timeout_s=10)
    assert clean.terminated and clean.done and not clean.finished() and clean.clean_end()
    # Framed cleanly with a finish_reason, but "abort": vLLM's shutdown ended it, not the answer.
    with serving(HEAD + event("a") + event("", "abort") + done + b"0\r\n\r\n") as url:
        aborted = raw_stream.stream(url, {"stream": True}, timeout_s=10)
    assert aborted.clean_end() and aborted.last_finish_reason == "abort" and not aborted.finished()


def test_a_response_cut_inside_a_chunk_keeps_what_arrived() -> None:
    cut = raw_stream.parse(HEAD + event("a") + b'40\r\ndata: {"choi')
    assert cut.text == "a" and cut.text_events == 1 and cut.errors == ['not JSON: {"choi']
    assert raw_stream.parse(b"HTTP/1.1 502 Bad Gateway\r\n").status is None  # the head itself cut short
    assert raw_stream.parse(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n").status == 502
