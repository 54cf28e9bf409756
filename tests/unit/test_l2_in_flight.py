"""The chart L2 plugin's book of running chunk reads and writes (podscripts/l2_connector.InFlightIO), on
real threads: LMCache's CPU memory is freed only after the I/O using it has ended, and none starts after.
tests/engine/test_l2_shutdown.py checks the same inside LMCache's engine at close."""

from __future__ import annotations

import threading
import time

from kvtier.podscripts import l2_connector


class Backend:
    """A stand-in for LMCache's LocalCPUBackend: close() frees the memory (recorded with when)."""

    def __init__(self) -> None:
        self.freed_at: float | None = None

    def close(self) -> None:
        self.freed_at = time.monotonic()


def test_the_memory_is_freed_only_after_a_running_write_ends() -> None:
    in_flight = l2_connector.InFlightIO()
    backend = Backend()
    l2_connector.free_after_io(backend, in_flight, timeout_s=30)
    assert in_flight.begin()
    ended: list[float] = []

    def write() -> None:
        time.sleep(0.5)
        ended.append(time.monotonic())
        in_flight.end()

    writer = threading.Thread(target=write)
    writer.start()
    backend.close()
    writer.join()
    assert backend.freed_at is not None and ended and backend.freed_at >= ended[0]


def test_no_io_starts_once_the_close_began() -> None:
    in_flight = l2_connector.InFlightIO()
    backend = Backend()
    l2_connector.free_after_io(backend, in_flight, timeout_s=30)
    backend.close()
    assert backend.freed_at is not None
    assert in_flight.begin() is False


def test_a_hung_write_delays_the_free_only_up_to_the_timeout() -> None:
    in_flight = l2_connector.InFlightIO()
    backend = Backend()
    l2_connector.free_after_io(backend, in_flight, timeout_s=0.3)
    assert in_flight.begin()  # never ended: a write stuck on a dead mount
    started = time.monotonic()
    backend.close()
    assert backend.freed_at is not None and 0.3 <= backend.freed_at - started < 5
    assert in_flight.drain(0) == 1
