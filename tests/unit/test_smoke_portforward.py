"""The local end of the port-forward: each connection relayed through its own session.

The session here is a plain loopback TCP connection to a stand-in server; what the API server adds
(the websocket port-forward of kubernetes.stream) only runs against a cluster with real kubelets."""

from __future__ import annotations

import socket
from contextlib import closing

import pytest
from test_kvcheck_fakes import as_json, as_text, serve

from kvtier.podscripts import kvcheck
from kvtier.smoke import portforward


class Session:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_relays_each_connection_through_a_new_session() -> None:
    sessions: list[Session] = []
    with serve(
        {("GET", "/v1/models"): as_json({"data": [{"id": "m"}]}), ("GET", "/metrics"): as_text("a 1")}
    ) as s:

        def opener() -> tuple[socket.socket, Session]:
            sessions.append(Session())
            return socket.create_connection(s.server_address), sessions[-1]

        with portforward.listen(opener) as url:
            assert kvcheck.http_json(url + "/v1/models")["data"][0]["id"] == "m"
            assert kvcheck.read_metrics(url + "/metrics") == {"a": 1.0}
    assert len(sessions) == 2
    assert s.seen == [("GET", "/v1/models"), ("GET", "/metrics")]


def test_a_refused_session_reaches_the_client_as_a_clear_error() -> None:
    def opener() -> tuple[socket.socket, Session]:
        raise RuntimeError("pods 'x' is forbidden")

    with (
        portforward.listen(opener) as url,
        pytest.raises(kvcheck.CheckError, match=r"GET http://127\.0\.0\.1"),
    ):
        kvcheck.http_text(url + "/health", timeout=5)


def test_the_listener_closes_with_the_context() -> None:
    with portforward.listen(lambda: (_ for _ in ()).throw(OSError())) as url:
        port = int(url.rsplit(":", 1)[1])
    with closing(socket.socket()) as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
