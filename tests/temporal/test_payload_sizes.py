"""Payload sizes on the real dev server: what crosses Temporal is measured as the
payload converter writes it (JSON with every character outside ASCII escaped, up to
12 bytes per character), not in characters. Each test failed before its fix."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import trio
import trio.testing
from temporalio.client import Client

from agentcore import FunctionTool, Message, ModelRequest, ModelResponse, ToolCall, Usage
from agentcore.testing import ScriptedModel, ScriptItem
from subagent import Defaults, Spec, SpecFile
from subagent.temporal import (
    DevServer,
    RootResult,
    StateTooLarge,
    Worker,
    controls_applied,
    events,
    interrupt,
    ledger_name,
    start,
    steer,
)
from subagent.temporal._approvals import MAX_CONTROL_PAGE_BYTES, Controls
from subagent.temporal._inputs import wire_size
from subagent.temporal._paused import encode_pause
from subagent.temporal._tree import MAX_BATCH_CHARS, Link, Outbox
from tests.temporal.pausing import Gates, steered
from tests.temporal.test_pause_limits import paused_state


def _specs(calls: int, text: str) -> SpecFile:
    """``big`` calls its read-only tool ``calls`` times in one turn (each returns
    ``text``), then answers ``done``."""

    async def big(arguments: str) -> str:
        await trio.lowlevel.checkpoint()
        return text

    def reply(request: ModelRequest) -> ScriptItem:
        if any(m.role == "tool" for m in request.messages):
            return ModelResponse(Message("assistant", "done"), "stop", Usage(1, 1))
        wanted = tuple(ToolCall(f"c{i}", "big", "{}") for i in range(calls))
        return ModelResponse(Message("assistant", "", tool_calls=wanted), "tool_calls",
                             Usage(1, 1))

    tool = FunctionTool("big", "Big results.", {"type": "object"}, big, read_only=True)
    return SpecFile("big", (Spec("big", model=ScriptedModel(reply), tools=(tool,)),), {}, {},
                    Defaults())


async def _run(server: DevServer, folder: Path, wid: str, calls: int,
               text: str) -> tuple[RootResult, list[str]]:
    client = await Client.connect(server.address)
    async with Worker(client, wid, specs=lambda: _specs(calls, text), ledger_dir=folder):
        handle = await start(client, "big", "go", task_queue=wid, id=wid)
        result = await handle.result()
        kinds = [str(event.kind) async for event in events(client, wid)]
        return result, kinds


START = ["task_queued", "task_started", "agent_start", "turn_start", "model_request",
         "model_response"]
END = ["turn_start", "model_request", "model_response", "agent_end", "task_finished"]


@pytest.mark.slow
def test_a_page_of_large_events_is_followed_in_pieces(dev_server: DevServer,
                                                      tmp_path: Path) -> None:
    # 12 events of 400,000 characters: one page of them (4.8 MB) was over gRPC's
    # 4 MiB and the follower failed at offset 0 every time ("Message too large").
    result, kinds = asyncio.run(_run(dev_server, tmp_path, "big-page", 12, "x" * 400_000))
    assert result == RootResult("finished", "done", None, 2, 2, 47, ledger_name("big-page"))
    # The 12 calls run in parallel (one turn): their tool_starts come in call order and
    # each call's events in their own order, but two calls' events may interleave.
    assert kinds[:len(START)] == START and kinds[-len(END):] == END
    middle = kinds[len(START):-len(END)]
    order = ["tool_start", "gate_decision", "tool_end"]
    assert sorted(middle) == sorted(order * 12)
    seen = dict.fromkeys(order, 0)
    for kind in middle:
        seen[kind] += 1
        assert seen["tool_start"] >= seen["gate_decision"] >= seen["tool_end"], middle


def test_a_finished_run_with_a_large_non_ascii_result_is_finished(dev_server: DevServer,
                                                                  tmp_path: Path) -> None:
    # 400,000 characters of "€" (2.4 MB as the converter writes them): the tool_end
    # event fitted the 1 MiB character cap, so the activity's result was over the
    # 2 MiB payload limit; the run finished but its workflow failed ("cannot resume
    # from the heartbeat: 0 running root tasks in it, not 1").
    result, kinds = asyncio.run(_run(dev_server, tmp_path, "big-euro", 1, "€" * 400_000))
    # The tool_end event is over MAX_EVENT_BYTES as sent: counted, not sent.
    assert result == RootResult("finished", "done", None, 2, 2, 13, ledger_name("big-euro"))
    assert kinds == [*START, "tool_start", "gate_decision", *END]


def test_an_outbox_batch_is_measured_as_sent() -> None:
    async def send(batch: object) -> None:
        await trio.lowlevel.checkpoint()

    outbox = Outbox(Link(send, lambda payload: None, lambda: False))
    euro = '"' + "€" * 50_000 + '"'  # 50,002 characters, 300,012 bytes as sent
    outbox.pending.extend([euro, euro, euro])
    outbox.sizes.extend(wire_size(t) for t in outbox.pending)
    assert outbox._batch() == [euro]
    assert wire_size(euro) * 2 > MAX_BATCH_CHARS > len(euro) * 3


async def test_a_paused_state_is_measured_as_sent(autojump_clock: trio.testing.MockClock,
                                                  ) -> None:
    # 200,000 characters of "€" twice (input and message): 1.2 MB of UTF-8, which the
    # bound counted, but 2.4 MB as sent: the activity's result was over 2 MiB.
    state = await paused_state("€" * 200_000)
    with pytest.raises(StateTooLarge) as info:
        encode_pause(state)
    size = int(re.findall(r"\d+", str(info.value))[0])
    assert size == wire_size(state.to_json()) + sum(
        wire_size(x) for x in ("c1", "write", '{"s": 0}', "ask a human", "w/0001")) + 64
    assert size > 2 * 1024 * 1024 > len(state.to_json().encode())


def test_a_page_of_controls_is_bounded_as_sent() -> None:
    books = Controls()
    for _ in range(12):
        assert books.add("steer", "é" * 60_000)  # 360,002 bytes each as sent
    page = books.since(0)
    assert [c.number for c in page] == [0, 1]  # a third would pass 1 MiB
    assert [c.number for c in books.since(2)] == [2, 3]
    books.add("interrupt")
    assert [c.number for c in books.since(11)] == [11, 12]
    assert sum(wire_size(c.text) for c in books.since(0)) <= MAX_CONTROL_PAGE_BYTES


async def _steered_while_no_worker(server: DevServer, folder: Path, gates: Gates) -> int:
    client = await Client.connect(server.address)
    handle = await start(client, "pilot", "fly", task_queue="steer-big", id="steer-big")
    for _ in range(12):  # kept by the workflow until an activity polls them
        await steer(client, "steer-big", "é" * 60_000)
    await interrupt(client, "steer-big")
    async with Worker(client, "steer-big", specs=lambda: steered(gates), ledger_dir=folder):
        await asyncio.to_thread(gates.waiting[0].wait, 30)
        try:
            async with asyncio.timeout(30):
                while (done := await controls_applied(client, "steer-big")) < 13:  # noqa: ASYNC110 (server state: polled)
                    await asyncio.sleep(0.05)
        finally:
            gates.opened[0].set()
            gates.opened[1].set()
            await handle.cancel()
        return done


@pytest.mark.slow
def test_queued_steering_texts_reach_the_root(dev_server: DevServer, tmp_path: Path) -> None:
    # 12 queued texts of 60,000 "é" (4.3 MB as sent): the activity's controls query
    # was over gRPC's 4 MiB at every poll, so no control (the interrupt neither)
    # ever reached the root.
    assert asyncio.run(_steered_while_no_worker(dev_server, tmp_path, Gates())) == 13


def _talker(answer: str) -> SpecFile:
    def reply(request: ModelRequest) -> ScriptItem:
        return ModelResponse(Message("assistant", answer), "stop", Usage(1, 1))

    return SpecFile("talk", (Spec("talk", model=ScriptedModel(reply)),), {}, {}, Defaults())


async def _answer(server: DevServer, folder: Path, answer: str) -> RootResult:
    client = await Client.connect(server.address)
    async with Worker(client, "talk", specs=lambda: _talker(answer), ledger_dir=folder):
        handle = await start(client, "talk", "go", task_queue="talk", id="talk-1")
        return await handle.result()


def test_an_answer_too_large_for_temporal_fails_saying_so(dev_server: DevServer,
                                                          tmp_path: Path) -> None:
    # 400,000 "€" (2.4 MB as sent) in the activity's result: Temporal refused it, the
    # attempt was retried, and the workflow failed with "cannot resume from the
    # heartbeat: 0 running root tasks in it, not 1".
    result = asyncio.run(_answer(dev_server, tmp_path, "€" * 400_000))
    assert result == RootResult(
        "failed", "", "the root's answer is 2400002 bytes as Temporal sends it, over the "
        "1048576 bytes an activity's result may carry (Temporal refuses payloads over "
        "2 MiB)", 1, 1, 7, ledger_name("talk-1"))
