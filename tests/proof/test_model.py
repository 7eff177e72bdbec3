"""Model-based test of the pool (issue 9): the real pool and the reference model of
tests/proof/_reference.py play the same random operations inside one trio run under
the mock clock, and after every step they must agree exactly.

Operations: submit (blocking, in a task of the test's own nursery) and submit_nowait,
from outside, as roots or under any path (fake, of a live task, of an ended one);
cancelling a submit blocked on the full queue; pool close and cancel; ``task.cancel()``
of any task; closing a stream; advancing virtual time (runs of spec ``w`` may time
out); completing, failing, or delegating (foreground, nested to the depth limit, or to
an unknown agent) the model call of a running task.

After every step (once every task is blocked): ``pool.statistics()`` equals the
model's; every task's status and ``done`` equal the model's; the runs blocked in a
model call are the model's; each submit's outcome is the model's (its task's path, or
the error it raised, or still blocked); each path's delivered events are exactly the
model's kinds, in order; each newly resolved task's ``wait()`` gives the model's
result or error. At the end the pool block is left and the whole log of each stream
passes ``check_events``.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import trio
import trio.testing
from hypothesis import event as label
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Message, ModelError, ModelRequest, ModelResponse, ToolCall
from subagent import (
    Event,
    Pool,
    Spec,
    Stream,
    SubagentError,
    SubagentTool,
    Task,
    TaskCancelled,
    TaskFailed,
    TaskTimeout,
    open_pool,
)
from subagent.testing import check_events

from ._reference import ROOT, SUB, UNKNOWN, WAITING, RefPool, RefTask

STREAMS = 3
#: Large enough that no send ever blocks.
BUFFER = 100_000
#: Keeps the idle watchdog out of the way, and makes the delegation tool wait without
#: the caller's tool_timeout (a spec with neither timeout nor idle_timeout gets it).
IDLE = 1e6


class Call:
    """One model call blocked until the test decides what it returns."""

    def __init__(self) -> None:
        self.released = trio.Event()
        self.action = "complete"
        self.agent = ""
        self.child = ""


class Puppet:
    """A ChatModel whose calls block until the test completes, fails or delegates them.

    Attributes:
      calls: The blocked calls by the run's task text (each run's key is unique).
    """

    def __init__(self) -> None:
        self.calls: dict[str, Call] = {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Block until released, then answer as told. A checkpoint."""
        key = next(m.content for m in request.messages if m.role == "user")
        turn = sum(1 for m in request.messages if m.role == "assistant") + 1
        assert key not in self.calls, f"two model calls at once for {key}"
        call = self.calls[key] = Call()
        try:
            await call.released.wait()
        finally:
            del self.calls[key]
        if call.action == "fail":
            raise ModelError(f"{key} failed")
        if call.action == "delegate":
            arguments = json.dumps({"agent": call.agent, "task": call.child})
            tool_call = ToolCall(f"{key}/{turn}", "subagent", arguments)
            return ModelResponse(Message("assistant", tool_calls=(tool_call,)), "tool_calls")
        return ModelResponse(Message("assistant", f"out {key}"))


class Harness:
    """Drives one pool and its :class:`RefPool` through drawn operations."""

    def __init__(self, data: st.DataObject, ref: RefPool, steps: int) -> None:
        self.data = data
        self.ref = ref
        self.steps = steps
        self.puppet = Puppet()
        self.streams = [Stream(BUFFER) for _ in range(STREAMS)]
        self.logs: list[list[Event]] = [[] for _ in range(STREAMS)]
        self.kinds: dict[tuple[str, ...], list[str]] = defaultdict(list)
        self.real: dict[tuple[str, ...], Task] = {}
        self.outcomes: dict[int, Task | str] = {}
        self.scopes: dict[int, trio.CancelScope] = {}
        self.resolved: set[tuple[str, ...]] = set()
        self.keys = itertools.count(1)
        self.sids = itertools.count(1)
        self.ops: list[str] = []

    # -- the run -------------------------------------------------------------------------

    async def main(self) -> None:
        """Open the pool, play the operations, leave the pool, check the end."""
        ref = self.ref
        # The helpers nursery (blocked submits) encloses the pool block: leaving the block
        # closes the pool, which releases them.
        async with (
            trio.open_nursery() as helpers,
            open_pool(max_concurrent=ref.max_concurrent, max_queued=ref.max_queued,
                      max_depth=ref.max_depth, events=self.streams[0]) as pool,
        ):
            tools = [SubagentTool(pool)]
            pool.register(Spec(ROOT, model=self.puppet, tools=tools,
                               max_turns=ref.max_turns, timeout=ref.timeout,
                               idle_timeout=IDLE))
            pool.register(Spec(SUB, model=self.puppet, tools=tools,
                               max_turns=ref.max_turns, idle_timeout=IDLE))
            await self.check(pool)
            for _ in range(self.steps):
                await self.step(pool, helpers)
                await self.check(pool)
            await self.finish(pool)
        self.drain()
        stats = pool.statistics()
        assert (stats.running, stats.queued, stats.holding_slots, stats.waiting_submitters) == (
            0, 0, 0, 0)
        assert all(t.done for t in ref.tasks) and all(t.done for t in self.real.values())
        assert stats == ref.statistics()
        for index, log in enumerate(self.logs):
            report = check_events(log, max_concurrent=None, complete=ref.open[index])
            assert report.events == len(log)

    async def step(self, pool: Pool, helpers: trio.Nursery) -> None:
        """Draw one operation and play it on the pool and the model."""
        ref, draw = self.ref, self.data.draw
        # Weighted: submits and model actions drive the story; a close, a stream close
        # and above all a pool cancel end much of it, so they come rarely.
        choices = ["submit"] * 4 + ["advance"] * 2 + ["cancel_task", "close_stream"]
        if ref.in_model_call():
            choices += ["act"] * 8
        if ref.waiter is not None:
            choices.append("cancel_waiter")
        choices += ["close", "cancel"]
        op = draw(st.sampled_from(choices))
        if op in ("close", "cancel", "close_stream") and draw(st.integers(0, 2)) > 0:
            op = "submit"
        if op == "cancel" and draw(st.booleans()):
            op = "advance"
        if op == "cancel_task" and not ref.tasks:
            op = "submit"
        self.ops.append(op)
        if op == "submit":
            self.submit(pool, helpers)
        elif op == "cancel_task":
            task = draw(st.sampled_from(ref.tasks))
            ref.cancel_task(task)
            self.real[task.path].cancel()
        elif op == "close_stream":
            index = draw(st.integers(0, STREAMS - 1))
            ref.close_stream(index)
            self.streams[index].close()
        elif op == "advance":
            seconds = draw(st.sampled_from([1.0, 3.0, 5.0]))
            ref.advance(seconds)
            await trio.sleep(seconds)
        elif op == "close":
            ref.close()
            pool.close()
        elif op == "cancel":
            ref.cancel()
            pool.cancel()
        elif op == "cancel_waiter":
            assert ref.waiter is not None
            scope = self.scopes[ref.waiter.sid]
            ref.cancel_waiter()
            scope.cancel()
        else:
            task = draw(st.sampled_from(ref.in_model_call()))
            action = draw(st.sampled_from(["complete", "fail", "delegate", "delegate"]))
            self.act(task, action)

    def submit(self, pool: Pool, helpers: trio.Nursery) -> None:
        """A submit from outside: a root, or under a fake path or a task's path."""
        ref, draw = self.ref, self.data.draw
        wait = ref.waiter is None and draw(st.booleans())
        # A blocked submit under a task's path races that task's cancel (see _reference).
        where = draw(st.sampled_from(["root", "root", "fake"] + ([] if wait else ["task"])))
        parent_path: tuple[str, ...] = ()
        if where == "fake":
            parent_path = tuple(f"x/{i:04d}" for i in range(draw(st.integers(1, 3))))
        elif where == "task" and ref.tasks:
            parent_path = draw(st.sampled_from(ref.tasks)).path
        # Only tasks with no parent may time out (see _reference).
        names = [SUB, UNKNOWN] if parent_path in ref.live else [ROOT, ROOT, SUB, UNKNOWN]
        name = draw(st.sampled_from(names))
        stream = draw(st.sampled_from([None, None, 1, 2]))
        key = f"k{next(self.keys)}"
        sid = next(self.sids)
        events = None if stream is None else self.streams[stream]
        self.ops[-1] = f"submit({'wait' if wait else 'nowait'}, {name}, {where})"
        ref.submit(sid, name, key, parent_path, stream, wait=wait)
        if wait:
            helpers.start_soon(self.blocking_submit, pool, sid, name, key, parent_path, events)
            return
        try:
            self.outcomes[sid] = pool.submit_nowait(name, key, parent_path=parent_path,
                                                    events=events)
        except (SubagentError, trio.WouldBlock) as exc:
            self.outcomes[sid] = type(exc).__name__

    async def blocking_submit(self, pool: Pool, sid: int, name: str, key: str,
                              parent_path: tuple[str, ...], events: Stream | None) -> None:
        """``await pool.submit(...)`` in a task of the test's nursery; records the outcome."""
        with trio.CancelScope() as scope:
            self.scopes[sid] = scope
            try:
                self.outcomes[sid] = await pool.submit(name, key, parent_path=parent_path,
                                                       events=events)
            except SubagentError as exc:
                self.outcomes[sid] = type(exc).__name__
        if scope.cancelled_caught:
            self.outcomes[sid] = "Cancelled"

    def act(self, task: RefTask, action: str) -> None:
        """Release the task's blocked model call with ``action``."""
        ref = self.ref
        call = self.puppet.calls[task.key]
        if action == "delegate":
            agent = self.data.draw(st.sampled_from([SUB, SUB, SUB, UNKNOWN]))
            if not ref.can_delegate(task, agent):
                action = "complete"
            else:
                call.agent, call.child = agent, f"k{next(self.keys)}"
                ref.delegate(task, agent, call.child)
        if action == "complete":
            ref.complete(task)
        elif action == "fail":
            ref.fail(task)
        call.action = action
        call.released.set()
        self.ops[-1] = f"{action}"

    async def finish(self, pool: Pool) -> None:
        """Bring every task to its end: cancel the pool, or close it and complete every
        model call until none is left."""
        ref = self.ref
        if self.data.draw(st.booleans(), label="finish by cancel"):
            ref.cancel()
            pool.cancel()
            await self.check(pool)
            return
        ref.close()
        pool.close()
        await self.check(pool)
        while ref.in_model_call():
            self.ops.append("finish")
            self.act(ref.in_model_call()[0], "complete")
            await self.check(pool)
        assert all(t.done for t in ref.tasks), [t for t in ref.tasks if not t.done]

    # -- the comparison ------------------------------------------------------------------

    def drain(self) -> None:
        """Take every event the streams hold."""
        for stream, log in zip(self.streams, self.logs, strict=True):
            while True:
                try:
                    event = stream.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                log.append(event)
                self.kinds[event.path].append(str(event.kind))

    async def check(self, pool: Pool) -> None:
        """Wait until every task is blocked, then compare the pool with the model."""
        await trio.testing.wait_all_tasks_blocked()
        self.drain()
        ref = self.ref
        where = f"after {self.ops}"
        assert pool.statistics() == ref.statistics(), where
        for sid, expected in ref.outcomes.items():
            got = self.outcomes.get(sid, WAITING)
            if isinstance(expected, RefTask):
                assert isinstance(got, Task) and got.path == expected.path, (sid, got, where)
                self.real[got.path] = got
            else:
                assert got == expected, (sid, got, expected, where)
        stack = list(self.real.values())
        while stack:
            for child in stack.pop().children:
                if child.path not in self.real:
                    self.real[child.path] = child
                    stack.append(child)
        assert set(self.real) == {t.path for t in ref.tasks}, where
        assert set(self.puppet.calls) == {t.key for t in ref.in_model_call()}, where
        for task in ref.tasks:
            real = self.real[task.path]
            assert (str(real.status), real.done) == (task.status, task.done), (task.path, where)
            assert self.kinds.get(task.path, []) == task.delivered, (task.path, where)
            if task.done and task.path not in self.resolved:
                self.resolved.add(task.path)
                await self.check_result(real, task)
        assert set(self.kinds) <= {t.path for t in ref.tasks}

    async def check_result(self, real: Task, task: RefTask) -> None:
        """``wait()`` of a resolved task gives the model's output or error."""
        errors = {"failed": TaskFailed, "timed_out": TaskTimeout, "cancelled": TaskCancelled}
        try:
            result = await real.wait()
        except (TaskFailed, TaskTimeout, TaskCancelled) as exc:
            assert type(exc) is errors[task.status], (task.path, exc)
            if task.status == "failed":
                assert isinstance(exc.__cause__, ModelError)
        else:
            assert task.status == "finished", (task.path, result)
            assert (result.path, result.output) == (task.path, task.output)


@given(st.data())
def test_the_pool_matches_the_reference_model(data: st.DataObject) -> None:
    """Random operations on a real pool and on the reference model agree at every step."""
    ref = RefPool(
        max_concurrent=data.draw(st.integers(1, 3), label="max_concurrent"),
        max_queued=data.draw(st.integers(1, 3), label="max_queued"),
        max_depth=data.draw(st.integers(1, 3), label="max_depth"),
        max_turns=data.draw(st.sampled_from([2, 3, 20]), label="max_turns"),
        timeout=data.draw(st.sampled_from([None, 4.0, 9.0]), label="timeout"),
        streams=STREAMS,
    )
    harness = Harness(data, ref, data.draw(st.integers(5, 50), label="steps"))
    trio.run(harness.main, clock=trio.testing.MockClock(autojump_threshold=0))
    statuses = sorted({t.status for t in ref.tasks})
    label(f"statuses: {statuses}")
    label(f"deepest: {max((len(t.path) for t in ref.tasks), default=0)}")
    for op in sorted({op.split("(")[0] for op in harness.ops}):
        label(f"op: {op}")
