"""EventLog, the server's bounded numbered log: what a reader at each position gets,
and what it is told it missed."""

from __future__ import annotations

import trio
import trio.testing

from subagent.serve._log import EventLog


def test_readers_get_what_follows_their_position_and_are_told_what_was_dropped() -> None:
    log = EventLog(3)
    assert log.since(0, 10) == ([], 0)
    for n in range(1, 6):
        assert log.append(("a/0001",), b"%d" % n) == n
    assert (log.last_id, log.held) == (5, 3)
    entries, missed = log.since(0, 10)
    assert ([e.id for e in entries], missed) == ([3, 4, 5], 2)
    entries, missed = log.since(3, 1)
    assert ([e.data for e in entries], missed) == ([b"4"], 0)
    assert log.since(5, 10) == ([], 0)


def test_the_log_holds_at_most_max_bytes_of_events_but_always_the_newest() -> None:
    log = EventLog(100, max_bytes=10)
    for _ in range(4):
        log.append((), b"xxxx")
    assert ([e.id for e in log.since(0, 10)[0]], log.held) == ([3, 4], 2)
    log.append((), b"y" * 50)
    assert [e.id for e in log.since(0, 10)[0]] == [5]


async def test_a_waiting_reader_wakes_on_the_next_event_or_the_close() -> None:
    log = EventLog(10)
    woke: list[int] = []

    async def reader() -> None:
        await log.wait_after(0)
        woke.append(log.last_id)
        await log.wait_after(1)
        woke.append(-1 if log.closed else log.last_id)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert woke == []
        log.append((), b"e")
        await trio.testing.wait_all_tasks_blocked()
        assert woke == [1]
        log.close()
    assert woke == [1, -1]
