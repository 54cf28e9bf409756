"""Reach a pod's port from this machine through the API server's port-forward (never a pod IP).

`forward(api, namespace, pod, port)` listens on 127.0.0.1 and relays each accepted connection
through its own `kubernetes.stream.portforward` session, so plain HTTP clients (urllib in kvcheck)
can use `http://127.0.0.1:<local port>` as if it were the pod.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any


def _relay(client: socket.socket, remote: Any) -> None:
    """Copy bytes both ways until either side closes."""
    sockets = [client, remote]
    try:
        while True:
            readable, _, broken = select.select(sockets, [], sockets, 300)
            if broken or not readable:
                return
            for source in readable:
                data = source.recv(65536)
                if not data:
                    return
                (remote if source is client else client).sendall(data)
    except OSError:
        return


Opener = Callable[[], tuple[Any, Any]]  # -> (a connected socket to the pod, the session to close)


def api_opener(api: Any, namespace: str, pod: str, port: int) -> Opener:
    """One API server port-forward session per connection (what `kubectl port-forward` does)."""

    def open_session() -> tuple[Any, Any]:
        from kubernetes.stream import portforward

        session = portforward(api.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port))
        return session.socket(port), session

    return open_session


def _serve(listener: socket.socket, opener: Opener) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return  # listener closed: the forward is over
        try:
            remote, session = opener()
        except Exception:  # the API server refused (pod gone, RBAC): the client sees a closed socket
            client.close()
            continue
        threading.Thread(target=_pipe, args=(client, remote, session), daemon=True).start()


def _pipe(client: socket.socket, remote: Any, session: Any) -> None:
    try:
        _relay(client, remote)
    finally:
        client.close()
        with contextlib.suppress(Exception):
            remote.close()
        with contextlib.suppress(Exception):
            session.close()


@contextlib.contextmanager
def listen(opener: Opener) -> Iterator[str]:
    """Yield http://127.0.0.1:<local port>; each connection to it is relayed through `opener()`."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    thread = threading.Thread(target=_serve, args=(listener, opener), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        listener.close()
        thread.join(timeout=5)


def forward(api: Any, namespace: str, pod: str, port: int) -> contextlib.AbstractContextManager[str]:
    """http://127.0.0.1:<local port> reaching `pod`:`port` through the API server (never the pod IP)."""
    return listen(api_opener(api, namespace, pod, port))
