"""Stream (SPEC 3.3): backpressure, close semantics, the drop policy, statistics."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from subagent import Event, EventKind, Stream, StreamStatistics
from subagent._stream import RECEIVE_BATCH


def ev(n: int) -> Event:
    return Event((f"a/{n:04d}",), EventKind.task_queued)


def stats(
    stream: Stream,
) -> tuple[int, int, int, int, bool, int, int]:
    s = stream.statistics()
    return (
        s.buffered, s.sent, s.dropped, s.dropped_after_close, s.closed,
        s.waiting_senders, s.waiting_receivers,
    )


async def test_send_and_receive_in_order() -> None:
    stream = Stream(3)
    for n in range(3):
        await stream.send(ev(n))
    assert stream.statistics() == StreamStatistics(
        buffered=3, max_buffer=3, sent=3, dropped=0, dropped_after_close=0,
        dropped_cancelled=0, reserved=0, closed=False, waiting_senders=0, waiting_receivers=0,
    )
    assert [await stream.receive() for _ in range(3)] == [ev(0), ev(1), ev(2)]
    with pytest.raises(trio.WouldBlock):
        stream.receive_nowait()


async def test_send_with_room_does_not_yield() -> None:
    stream = Stream(10)
    other_ran = False

    async def other() -> None:
        nonlocal other_ran
        other_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for n in range(10):
            await stream.send(ev(n))
        assert not other_ran
    assert other_ran


async def test_send_checks_for_cancellation() -> None:
    stream = Stream(10)
    with trio.CancelScope() as scope:
        scope.cancel()
        await stream.send(ev(1))
    assert scope.cancelled_caught
    assert stats(stream) == (0, 0, 0, 0, False, 0, 0)
    assert stream.statistics().dropped_cancelled == 1


async def test_send_blocks_while_full_and_resumes_in_order() -> None:
    stream = Stream(1)
    await stream.send(ev(0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream.send, ev(1))
        await trio.testing.wait_all_tasks_blocked()
        assert stats(stream) == (1, 1, 0, 0, False, 1, 0)
        assert await stream.receive() == ev(0)
        assert stats(stream) == (1, 2, 0, 0, False, 0, 0)
    assert await stream.receive() == ev(1)


async def test_cancelled_blocked_sender_leaves_no_event() -> None:
    stream = Stream(1)
    await stream.send(ev(0))
    with trio.move_on_after(1) as scope:
        await stream.send(ev(1))
    assert scope.cancelled_caught
    assert stats(stream) == (1, 1, 0, 0, False, 0, 0)
    assert stream.statistics().dropped_cancelled == 1


async def test_receiver_waits_for_a_send() -> None:
    stream = Stream(0)
    got: list[Event] = []

    async def receive() -> None:
        got.append(await stream.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        assert stats(stream) == (0, 0, 0, 0, False, 0, 1)
        stream.send_nowait(ev(7))
    assert got == [ev(7)]


async def test_a_burst_wakes_a_parked_receiver_once_and_keeps_order() -> None:
    stream = Stream(2)
    got: list[Event] = []

    async def receive_two() -> None:
        for _ in range(2):
            got.append(await stream.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive_two)
        await trio.testing.wait_all_tasks_blocked()
        for n in range(2):
            stream.send_nowait(ev(n))
        # The first send woke the receiver, the second just buffered.
        assert stats(stream) == (2, 2, 0, 0, False, 0, 0)
        with pytest.raises(trio.WouldBlock):
            stream.send_nowait(ev(2))
    assert got == [ev(0), ev(1)]


async def test_receive_drains_a_backlog_yielding_once_per_batch() -> None:
    stream = Stream(RECEIVE_BATCH * 2)
    for n in range(RECEIVE_BATCH * 2):
        stream.send_nowait(ev(n))
    other_ran = False

    async def other() -> None:
        nonlocal other_ran
        other_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for _ in range(RECEIVE_BATCH - 1):
            await stream.receive()
        assert not other_ran
        with trio.testing.assert_checkpoints():
            await stream.receive()


async def test_receive_with_a_backlog_checks_for_cancellation() -> None:
    stream = Stream(2)
    await stream.send(ev(0))
    with trio.CancelScope() as scope:
        scope.cancel()
        await stream.receive()
    assert scope.cancelled_caught
    assert stats(stream) == (1, 1, 0, 0, False, 0, 0)


async def test_a_woken_receiver_whose_event_was_taken_waits_again() -> None:
    stream = Stream(1)
    got: list[Event] = []

    async def receive() -> None:
        got.append(await stream.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        stream.send_nowait(ev(0))
        assert stream.receive_nowait() == ev(0)
        await trio.testing.wait_all_tasks_blocked()
        assert stats(stream) == (0, 1, 0, 0, False, 0, 1)
        stream.send_nowait(ev(1))
    assert got == [ev(1)]


async def test_zero_buffer_send_waits_for_a_receiver() -> None:
    stream = Stream(0)
    with pytest.raises(trio.WouldBlock):
        stream.send_nowait(ev(0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream.send, ev(1))
        await trio.testing.wait_all_tasks_blocked()
        assert stream.receive_nowait() == ev(1)


async def test_close_releases_blocked_senders_and_drops_their_events() -> None:
    stream = Stream(1)
    await stream.send(ev(0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream.send, ev(1))
        nursery.start_soon(stream.send, ev(2))
        await trio.testing.wait_all_tasks_blocked()
        stream.close()
    assert stats(stream) == (1, 1, 0, 2, True, 0, 0)
    assert [e async for e in stream] == [ev(0)]


async def test_sends_after_close_are_dropped_silently() -> None:
    stream = Stream(4)
    await stream.send(ev(0))
    stream.close()
    stream.close()
    await stream.send(ev(1))
    stream.send_nowait(ev(2))
    assert stats(stream) == (1, 1, 0, 2, True, 0, 0)


async def test_consumers_end_after_draining() -> None:
    stream = Stream(4)
    got: list[Event] = []

    async def consume() -> None:
        async for event in stream:
            got.append(event)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        nursery.start_soon(consume)
        await stream.send(ev(0))
        await stream.send(ev(1))
        await trio.testing.wait_all_tasks_blocked()
        stream.close()
    assert sorted(got, key=lambda e: e.path) == [ev(0), ev(1)]
    with pytest.raises(trio.EndOfChannel):
        await stream.receive()
    with pytest.raises(trio.EndOfChannel):
        stream.receive_nowait()


async def test_drop_newest_counts_drops_and_never_blocks() -> None:
    stream = Stream(2, overflow="drop_newest")
    for n in range(5):
        await stream.send(ev(n))
    assert stats(stream) == (2, 2, 3, 0, False, 0, 0)
    stream.close()
    assert [e async for e in stream] == [ev(0), ev(1)]


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match=r"^Stream buffer must be at least 0, not -1$"):
        Stream(-1)
    with pytest.raises(ValueError, match=r"^Stream overflow must be 'block' or 'drop_newest'"):
        Stream(1, overflow="drop_oldest")  # type: ignore[arg-type]


async def test_repr() -> None:
    stream = Stream(2, overflow="drop_newest")
    for n in range(3):
        await stream.send(ev(n))
    assert repr(stream) == "<subagent.Stream 2/2 buffered, sent=2, dropped=1>"
    stream.close()
    assert repr(stream) == "<subagent.Stream 2/2 buffered, sent=2, dropped=1 closed>"


async def test_a_cancelled_send_after_the_close_counts_as_after_close() -> None:
    stream = Stream(1)
    stream.close()
    with trio.CancelScope() as scope:
        scope.cancel()
        await stream.send(ev(0))
    s = stream.statistics()
    assert (s.dropped_after_close, s.dropped_cancelled) == (1, 0)


async def test_reserved_events_go_beyond_a_full_buffer_in_order() -> None:
    stream = Stream(1)
    await stream.send(ev(0))
    stream._send_reserved(ev(1))
    stream._send_reserved(ev(2))
    assert stream.statistics() == StreamStatistics(
        buffered=3, max_buffer=1, sent=3, dropped=0, dropped_after_close=0,
        dropped_cancelled=0, reserved=2, closed=False, waiting_senders=0, waiting_receivers=0,
    )
    async with trio.open_nursery() as nursery:
        # An ordinary send waits while the reserve is in use, as for a full buffer.
        nursery.start_soon(stream.send, ev(3))
        await trio.testing.wait_all_tasks_blocked()
        assert stats(stream) == (3, 3, 0, 0, False, 1, 0)
        assert stream.receive_nowait() == ev(0)
        assert stream.receive_nowait() == ev(1)
        assert stats(stream) == (1, 3, 0, 0, False, 1, 0)
        assert stream.receive_nowait() == ev(2)
        assert stats(stream) == (1, 4, 0, 0, False, 0, 0)
    assert stream.receive_nowait() == ev(3)


async def test_reserved_events_are_not_dropped_by_drop_newest() -> None:
    stream = Stream(1, overflow="drop_newest")
    stream.send_nowait(ev(0))
    stream.send_nowait(ev(1))
    stream._send_reserved(ev(2))
    stream.send_nowait(ev(3))
    s = stream.statistics()
    assert (s.buffered, s.sent, s.dropped, s.reserved) == (2, 2, 2, 1)
    stream.close()
    assert [e async for e in stream] == [ev(0), ev(2)]


async def test_a_reserved_event_wakes_a_parked_receiver() -> None:
    stream = Stream(0)
    got: list[Event] = []

    async def receive() -> None:
        got.append(await stream.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        stream._send_reserved(ev(5))
        assert stream.statistics().reserved == 0
    assert got == [ev(5)]


async def test_reserved_events_after_the_close_are_dropped_and_counted() -> None:
    stream = Stream(1)
    stream.close()
    stream._send_reserved(ev(0))
    stream._drop_unpaired(ev(1))
    assert stats(stream) == (0, 0, 0, 2, True, 0, 0)


async def test_drop_unpaired_counts_as_dropped() -> None:
    stream = Stream(1, overflow="drop_newest")
    stream._drop_unpaired(ev(1))
    assert stats(stream) == (0, 0, 1, 0, False, 0, 0)


async def test_a_consumer_closing_on_its_way_out_releases_blocked_senders() -> None:
    # The try/finally pattern of the Stream docstring: the consumer is cancelled
    # (it went away); its close wakes the blocked senders, who count their events.
    stream = Stream(0)
    got: list[Event] = []

    async def consume(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            try:
                async for event in stream:
                    got.append(event)
                    await trio.sleep_forever()
            finally:
                stream.close()

    async with trio.open_nursery() as nursery:
        consumer = await nursery.start(consume)
        for n in range(3):
            nursery.start_soon(stream.send, ev(n))
            await trio.testing.wait_all_tasks_blocked()
        assert stats(stream) == (0, 1, 0, 0, False, 2, 0)
        consumer.cancel()
    assert got == [ev(0)]
    assert stats(stream) == (0, 1, 0, 2, True, 0, 0)
