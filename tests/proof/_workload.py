"""The workload simulator of tests/proof/test_trace.py: random operations on a real
pool, drawn from what the pool shows (its tasks, the runs blocked in a model call).
It predicts nothing; the trace check does (see test_trace.py).

* two specs: ``w`` (the spec's ``timeout``, if any) and ``v`` (no timeout); every
  run's model call blocks until the test completes it, fails it, or makes it
  delegate (foreground, ``wait: true``) to ``v`` or to the unknown agent ``nope``;
* streams big enough never to block, numbered 0 (the pool's) to 2;
* submits from outside, blocking (at most one at a time) or not, as roots, under a
  path no task has, or under a task's path.
"""

from __future__ import annotations

import itertools
import json

import trio
from hypothesis import strategies as st

from agentcore import Message, ModelError, ModelRequest, ModelResponse, ToolCall
from subagent import Pool, Spec, Stream, SubagentError, SubagentTool, Task

ROOT = "w"
"""The spec that may have a timeout."""
SUB = "v"
"""The spec delegations name (no timeout)."""
UNKNOWN = "nope"
"""A name no spec has."""
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


class Workload:
    """Draws operations and plays them on ``pool``; keeps what it submitted.

    Attributes:
      tasks: Every task seen, by path (submitted, or found below one).
      outcomes: Each submit's Task, or the name of the error it raised.
      waiting: The blocking submit not yet returned, if any.
      ops: The operations played, for failure messages.
    """

    def __init__(
        self,
        data: st.DataObject,
        pool: Pool,
        streams: list[Stream],
        timeout: float | None,
        max_turns: int,
    ) -> None:
        self.data = data
        self.pool = pool
        self.streams = streams
        self.puppet = Puppet()
        self.tasks: dict[tuple[str, ...], Task] = {}
        self.outcomes: dict[int, Task | str] = {}
        self.waiting: int | None = None
        self.scopes: dict[int, trio.CancelScope] = {}
        self.keys = itertools.count(1)
        self.sids = itertools.count(1)
        self.ops: list[str] = []
        tools = [SubagentTool(pool)]
        pool.register(
            Spec(
                ROOT,
                model=self.puppet,
                tools=tools,
                max_turns=max_turns,
                timeout=timeout,
                idle_timeout=IDLE,
            )
        )
        pool.register(
            Spec(SUB, model=self.puppet, tools=tools, max_turns=max_turns, idle_timeout=IDLE)
        )

    def in_model_call(self) -> list[Task]:
        """The tasks whose run is blocked in a model call, in path order."""
        return sorted(
            (t for t in self.tasks.values() if t.input in self.puppet.calls), key=lambda t: t.path
        )

    def learn(self) -> None:
        """Add every task found below a known one."""
        stack = list(self.tasks.values())
        while stack:
            for child in stack.pop().children:
                if child.path not in self.tasks:
                    self.tasks[child.path] = child
                    stack.append(child)

    async def step(self, helpers: trio.Nursery) -> None:
        """Draw one operation and play it."""
        draw, pool = self.data.draw, self.pool
        self.learn()
        # Weighted: submits and model actions drive the story; a close, a stream close
        # and above all a pool cancel end much of it, so they come rarely.
        choices = ["submit"] * 4 + ["advance"] * 2 + ["cancel_task", "close_stream"]
        if self.in_model_call():
            choices += ["act"] * 8
        if self.waiting is not None:
            choices.append("cancel_waiter")
        choices += ["close", "cancel"]
        op = draw(st.sampled_from(choices))
        if op in ("close", "cancel", "close_stream") and draw(st.integers(0, 2)) > 0:
            op = "submit"
        if op == "cancel" and draw(st.booleans()):
            op = "advance"
        if op == "cancel_task" and not self.tasks:
            op = "submit"
        self.ops.append(op)
        if op == "submit":
            self.submit(helpers)
        elif op == "cancel_task":
            draw(st.sampled_from(sorted(self.tasks.values(), key=lambda t: t.path))).cancel()
        elif op == "close_stream":
            self.streams[draw(st.integers(0, STREAMS - 1))].close()
        elif op == "advance":
            await trio.sleep(draw(st.sampled_from([1.0, 3.0, 5.0])))
        elif op == "close":
            pool.close()
        elif op == "cancel":
            pool.cancel()
        elif op == "cancel_waiter":
            assert self.waiting is not None
            self.scopes[self.waiting].cancel()
        else:
            self.act(
                draw(st.sampled_from(self.in_model_call())),
                draw(st.sampled_from(["complete", "fail", "delegate", "delegate"])),
            )

    def submit(self, helpers: trio.Nursery) -> None:
        """A submit from outside: a root, or under a fake path or a task's path."""
        draw = self.data.draw
        wait = self.waiting is None and draw(st.booleans())
        where = draw(st.sampled_from(["root", "root", "fake", "task"]))
        parent_path: tuple[str, ...] = ()
        if where == "fake":
            parent_path = tuple(f"x/{i:04d}" for i in range(draw(st.integers(1, 3))))
        elif where == "task" and self.tasks:
            parent_path = draw(st.sampled_from(sorted(self.tasks)))
        name = draw(st.sampled_from([ROOT, ROOT, SUB, UNKNOWN]))
        stream = draw(st.sampled_from([None, None, 1, 2]))
        events = None if stream is None else self.streams[stream]
        key = f"k{next(self.keys)}"
        sid = next(self.sids)
        self.ops[-1] = f"submit({'wait' if wait else 'nowait'}, {name}, {where})"
        if wait:
            self.waiting = sid
            helpers.start_soon(self.blocking_submit, sid, name, key, parent_path, events)
            return
        try:
            task = self.pool.submit_nowait(name, key, parent_path=parent_path, events=events)
        except (SubagentError, trio.WouldBlock) as exc:
            self.outcomes[sid] = type(exc).__name__
        else:
            self.outcomes[sid] = self.tasks[task.path] = task

    async def blocking_submit(
        self, sid: int, name: str, key: str, parent_path: tuple[str, ...], events: Stream | None
    ) -> None:
        """``await pool.submit(...)`` in a task of the test's nursery; records the outcome."""
        with trio.CancelScope() as scope:
            self.scopes[sid] = scope
            try:
                task = await self.pool.submit(name, key, parent_path=parent_path, events=events)
            except SubagentError as exc:
                self.outcomes[sid] = type(exc).__name__
            else:
                self.outcomes[sid] = self.tasks[task.path] = task
        if scope.cancelled_caught:
            self.outcomes[sid] = "Cancelled"
        self.waiting = None

    def act(self, task: Task, action: str) -> None:
        """Release the task's blocked model call with ``action``."""
        call = self.puppet.calls[task.input]
        if action == "delegate":
            call.agent = self.data.draw(st.sampled_from([SUB, SUB, SUB, UNKNOWN]))
            call.child = f"k{next(self.keys)}"
        call.action = action
        call.released.set()
        self.ops[-1] = f"{action} {'/'.join(task.path)}"
