"""A sink promises that an acknowledged entry is on disk: a path that names no regular
file (a FIFO, a device, a socket, a directory) is refused when the sink opens, before
any entry is acknowledged (issue 33). A symbolic link to a regular file is followed."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import JsonlSink, Record, SinkError, SqliteSink, _sqlite, verify

KINDS = {
    "fifo": "a FIFO",
    "null": "a character device",
    "socket": "a socket",
    "directory": "a directory",
}


@pytest.fixture
def special(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A path of the kind the test is parametrized with."""
    kind = request.param
    path = tmp_path / kind
    bound: list[socket.socket] = []
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "null":
        path.symlink_to("/dev/null")
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        bound.append(server)
    else:
        path.mkdir()
    yield path
    for server in bound:
        server.close()


@pytest.mark.parametrize("special", list(KINDS), indirect=True)
async def test_a_jsonl_sink_refuses_a_path_that_is_no_regular_file(special: Path) -> None:
    # Before: the first entry to a FIFO or /dev/null was acknowledged, and lost.
    sink = JsonlSink(special)
    with pytest.raises(SinkError) as info:
        await sink.record(Record("prompt"))
    kind = KINDS[special.name]
    assert str(info.value) == (
        f"cannot record to ledger {special}: it is {kind}, not a regular file")
    assert info.value.cause == f"it is {kind}, not a regular file"
    assert sink.statistics().last_seq == 0
    # Every later record is refused the same way, at once.
    with pytest.raises(SinkError, match=f"it is {kind}, not a regular file$"):
        await sink.record(Record("prompt"))
    await sink.aclose()


@pytest.mark.parametrize("special", ["fifo", "socket", "directory"], indirect=True)
async def test_an_sqlite_sink_refuses_a_path_that_is_no_regular_file(special: Path) -> None:
    sink = SqliteSink(special)
    with pytest.raises(SinkError) as info:
        await sink.record(Record("prompt"))
    kind = KINDS[special.name]
    assert str(info.value) == (
        f"cannot record to ledger {special}: it is {kind}, not a regular file")
    assert sink.statistics().last_seq == 0
    await sink.aclose()
    # Refused before anything was created beside it.
    assert os.listdir(special.parent) == [special.name]


@pytest.mark.parametrize("cls", [JsonlSink, SqliteSink])
async def test_a_symbolic_link_to_a_regular_file_is_followed(
    tmp_path: Path, cls: type[JsonlSink] | type[SqliteSink]
) -> None:
    target = tmp_path / "real.ledger"
    target.touch()
    link = tmp_path / "link.ledger"
    link.symlink_to(target)
    sink = cls(link)
    await sink.record(Record("prompt"))
    await sink.record(Record("prompt"))
    await sink.aclose()
    assert link.is_symlink()
    report = verify(target)
    assert (report.ok, report.entries) == (True, 2)


def _swap_before(module: object, name: str, path: Path, kind: str,
                 monkeypatch: pytest.MonkeyPatch) -> None:
    # ``module.name`` (the connect step) swaps ``path`` first: a FIFO (a real one) or
    # another regular file put in its place after the sink checked it, before SQLite
    # opens it.
    real = getattr(module, name)

    def swapped(*args: object, **kwargs: object) -> object:
        if kind == "fifo":
            path.unlink()
            os.mkfifo(path)
        else:
            other = path.with_name("other")
            other.touch()  # made while the checked file exists: another inode
            other.replace(path)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, swapped)


@pytest.mark.parametrize(("kind", "cause"), [
    ("fifo", "it is a FIFO, not a regular file"),
    ("regular", "it was replaced while it was opened"),
])
async def test_an_sqlite_sink_refuses_a_file_swapped_in_before_sqlite_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, cause: str
) -> None:
    # Before: the FIFO failed with SQLite's raw "disk I/O error"; the other file was taken.
    path = tmp_path / "ledger.db"
    _swap_before(_sqlite, "connect", path, kind, monkeypatch)
    sink = SqliteSink(path)
    with pytest.raises(SinkError) as info:
        await sink.record(Record("prompt"))
    assert str(info.value) == f"cannot record to ledger {path}: {cause}"
    assert info.value.cause == cause
    assert sink.statistics().last_seq == 0
    await sink.aclose()
