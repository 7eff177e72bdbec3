"""The peer fault matrix's model-server rows (``matrix.GRIDS["openai"]`` and
``["anthropic"]``): a misbehaving server on 127.0.0.1 in this trio run, driven through
``OpenAIChatModel`` and ``AnthropicChatModel`` in a pool, on trio's mock clock (every
time below is virtual and exact).

The limits are the adapters' and the retry policy's, made small: ``read_timeout`` 2 s
(so ``total_timeout`` 20 s), ``max_response_bytes`` 64 KiB, two attempts 1 s apart.
"""

from __future__ import annotations

from functools import partial

import attrs
import pytest
import trio
import trio.testing

from agentcore import RetryPolicy
from agentcore.models import AnthropicChatModel, OpenAIChatModel
from ledger import MemorySink
from subagent import Event, Pool, Spec, Stream, TaskError, open_pool

from .cellkit import bystander_finishes, check_ledger, check_levels, register_bystander
from .matrix import cells
from .peer_models import Behaviour, ModelPeer

RETRY = RetryPolicy(max_attempts=2, base_delay=1.0, jitter=0.0)
#: Virtual seconds that bound a cell; a cell that reaches it has hung.
DEADLINE = 600.0
BEHAVIOUR = {
    "killed_mid_call": Behaviour.partial_then_reset,
    "hangs": Behaviour.hang,
    "drips": Behaviour.drip,
    "garbage": Behaviour.garbage,
    "oversized": Behaviour.oversized,
    "closes_early": Behaviour.close,
}
NAME = {"openai": "OpenAI", "anthropic": "Anthropic"}


def model(api: str, url: str) -> OpenAIChatModel | AnthropicChatModel:
    if api == "openai":
        return OpenAIChatModel("gpt-test", api_key="sk-test-0000", base_url=url,
                               read_timeout=2.0, connect_timeout=2.0,
                               max_response_bytes=65536)
    return AnthropicChatModel("claude-test", api_key="sk-ant-test-0000", base_url=url,
                              read_timeout=2.0, connect_timeout=2.0, max_response_bytes=65536)


@attrs.define
class Seen:
    """What a cell saw of its victim task."""

    error: str = ""
    output: str = ""
    elapsed: float = -1.0
    events: list[Event] = attrs.Factory(list)
    entries: list[tuple[str, str | None]] = attrs.Factory(list)


async def play(api: str, fault: str, moment: str) -> tuple[Seen, int]:
    seen = Seen()
    peer = ModelPeer(api)
    sink = MemorySink()
    stream = Stream(100_000)
    async with trio.open_nursery() as outer:
        await outer.start(peer.run)
        if fault == "comes_back" and moment == "starting":
            # Not up when the pool starts: it comes back on its port after 0.5 s.
            await peer.kill()
        with trio.move_on_after(DEADLINE) as bound:
            async with open_pool(events=stream) as pool:
                pool.register(Spec("victim", model=model(api, peer.url), audit=sink,
                                   retry=RETRY))
                register_bystander(pool, sink)
                await scenario(pool, peer, outer, fault, moment, seen)
                if moment != "close":
                    await bystander_finishes(pool)
        assert not bound.cancelled_caught, "the cell hung"
        outer.cancel_scope.cancel()
    stream.close()
    seen.events = [e async for e in stream if e.path and e.path[-1].startswith("victim")]
    seen.entries = [(e.kind, e.error) for e in sink.entries if e.agent_id == "victim"]
    check_ledger(sink)
    return seen, peer.port


async def revive(peer: ModelPeer, nursery: trio.Nursery, after: float) -> None:
    await trio.sleep(after)
    peer.behaviour = Behaviour.answer
    await nursery.start(peer.run)


async def scenario(pool: Pool, peer: ModelPeer, outer: trio.Nursery, fault: str,
                   moment: str, seen: Seen) -> None:
    if moment == "idle":
        # A first call is answered; the server dies before the next one.
        first = await (await pool.submit("victim", "first")).wait()
        assert first.output == "fine"
        await peer.kill()
        if fault == "comes_back":
            outer.start_soon(revive, peer, outer, 0.5)
    elif fault == "comes_back":
        if moment == "mid_call":
            peer.behaviour = Behaviour.partial_then_reset
            outer.start_soon(partial(revive_after_kill, peer, outer))
        else:
            outer.start_soon(revive, peer, outer, 0.5)
    else:
        peer.behaviour = BEHAVIOUR[fault]
    start = trio.current_time()
    task = await pool.submit("victim", "go")
    if moment in ("cancel", "close"):
        await peer.requested.wait()
        start = trio.current_time()
        if moment == "cancel":
            task.cancel()
        else:
            await bystander_finishes(pool)
            pool.cancel()
    try:
        seen.output = (await task.wait()).output
    except TaskError as exc:
        seen.error = f"{type(exc).__name__}: {exc}"
    seen.elapsed = trio.current_time() - start


async def revive_after_kill(peer: ModelPeer, nursery: trio.Nursery) -> None:
    await peer.requested.wait()
    await trio.sleep(0.5)
    await revive(peer, nursery, 0)


FAILED = ["retry", "error", "agent_end", "task_finished"]
#: The ledger of a run whose model call failed: the failed attempt ("retry", its
#: error), then the run's end.
FAILED_ENTRIES = ["task_queued", "task_started", "prompt", "retry", "run_end",
                  "task_finished"]
NOT_RETRIED = ["task_queued", "task_started", "prompt", "run_end", "task_finished"]
CANCELLED = ["agent_end", "task_cancelled"]
CANCELLED_ENTRIES = ["task_queued", "task_started", "prompt", "abort", "run_end",
                     "task_cancelled"]
ANSWERED = ["model_delta", "model_response", "agent_end", "task_finished"]
ANSWERED_ENTRIES = ["task_queued", "task_started", "prompt", "model_response", "run_end",
                    "task_finished"]
RECOVERED_ENTRIES = ["task_queued", "task_started", "prompt", "retry", "model_response",
                     "run_end", "task_finished"]
REFUSED = "TransientModelError: {api} connection failed: all attempts to connect to {host} failed"
#: (fault, moment): the victim's end ("fine" or its error, {api} and {host} filled in),
#: the virtual seconds from the fault (or the cancel) to it, its events after its first
#: model_request (and those of its first task, at the idle moment) and its ledger kinds.
EXPECTED: dict[tuple[str, str], tuple[str, float, list[str], list[str]]] = {
    ("killed_mid_call", "mid_call"): (REFUSED, 1.0, FAILED, FAILED_ENTRIES),
    ("killed_between_calls", "idle"): (
        REFUSED, 1.0, ANSWERED + FAILED, ANSWERED_ENTRIES + FAILED_ENTRIES),
    ("hangs", "mid_call"): (
        "TransientModelError: {api} request timed out (read timeout)", 5.0, FAILED,
        FAILED_ENTRIES),
    ("hangs", "cancel"): ("cancelled", 0.0, CANCELLED, CANCELLED_ENTRIES),
    ("hangs", "close"): ("cancelled", 0.0, CANCELLED, CANCELLED_ENTRIES),
    ("drips", "mid_call"): (
        "TransientModelError: {api} call took longer than total_timeout (20 s)", 41.0, FAILED,
        FAILED_ENTRIES),
    ("drips", "cancel"): ("cancelled", 0.0, CANCELLED, CANCELLED_ENTRIES),
    ("drips", "close"): ("cancelled", 0.0, CANCELLED, CANCELLED_ENTRIES),
    ("garbage", "mid_call"): (
        "TransientModelError: {api} connection failed: illegal status line: "
        "bytearray(b'\\x00\\xffNOT HTTP AT ALL')", 1.0, FAILED, FAILED_ENTRIES),
    ("oversized", "mid_call"): (
        "ModelError: {api} reply is larger than max_response_bytes (65536 bytes)", 0.0,
        FAILED[1:], NOT_RETRIED),
    ("closes_early", "mid_call"): (
        "TransientModelError: {api} connection failed: Server disconnected without sending "
        "a response.", 1.0, FAILED, FAILED_ENTRIES),
    ("comes_back", "starting"): ("fine", 1.0, ["retry", *ANSWERED], RECOVERED_ENTRIES),
    ("comes_back", "idle"): (
        "fine", 1.0, [*ANSWERED, "retry", *ANSWERED], ANSWERED_ENTRIES + RECOVERED_ENTRIES),
    ("comes_back", "mid_call"): ("fine", 1.0, ["retry", *ANSWERED], RECOVERED_ENTRIES),
}
QUIET = {"task_queued", "task_started", "agent_start", "turn_start", "model_request"}


@pytest.mark.parametrize(("peer", "fault", "moment"), cells("openai", "anthropic"))
def test_model_server_cell(peer: str, fault: str, moment: str) -> None:
    seen: list[tuple[Seen, int]] = []

    def run() -> None:
        clock = trio.testing.MockClock(autojump_threshold=0.005)
        seen.append(trio.run(play, peer, fault, moment, clock=clock))

    check_levels(run, peer)
    got, port = seen[0]
    end, elapsed, events, entries = EXPECTED[fault, moment]
    task = "victim/0002" if moment == "idle" else "victim/0001"
    if end == "fine":
        assert got.output == end
    elif end == "cancelled":
        assert got.error == f"TaskCancelled: task {task} was cancelled"
    else:
        error = end.format(api=NAME[peer], host=f"127.0.0.1:{port}")
        assert got.error == f"TaskFailed: task {task} failed: {error}"
        # The ledger's end of the run says the same.
        assert got.entries[-1] == ("task_finished", error)
        assert got.events[-1].error == error
    assert got.elapsed == elapsed
    assert [e.kind for e in got.events if e.kind not in QUIET] == events
    assert [kind for kind, _ in got.entries] == entries
    # Each failed attempt's entry says what failed, as its event does.
    retried = [e.event.text for e in got.events if e.kind == "retry" and e.event is not None]
    assert [error for kind, error in got.entries if kind == "retry"] == retried
    assert all(text.endswith("; retrying in 1s") for text in retried)
