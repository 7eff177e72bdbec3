"""A :class:`~tests.durable.shapes.Shape` run in a pool with ``SqliteCheckpoints`` and a
durable ledger, as the crash-point harness drives it in a (forked) child process.

Everything the harness checks afterwards goes to one *timeline* file, appended
(``O_APPEND``) by every process of a cell in order: the crash points' trace (``K
LABEL``, from ``ledger._crashpoints``), each tool execution (``effect TOOL KEY RUN_ID
CALL_ID``: the side effects, outside the durable layer), and the driver's notes
(``phase``, ``submitted``, ``approved``, ``output``, ``failed``, ``error``,
``again``).

The models are functions of the conversation, so a recovered run continues its
script where its checkpoint left it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import attrs
import trio

import agentcore
from agentcore import FINAL_RESULT, FunctionTool, Message, ModelRequest, ToolCall
from agentcore._run._checkpoint import INTERRUPTED
from agentcore.testing import ScriptedModel
from ledger import JsonlSink, MemorySink, Sink, SqliteSink
from subagent import (
    Budget,
    Pool,
    Spec,
    SqliteCheckpoints,
    SubagentResultsTool,
    SubagentTool,
    Task,
    TaskPaused,
    open_pool,
)

from .shapes import Shape

#: The root task's text (and so the prefix of every task's).
ROOT_TASK = "T"
_CHILD_OUTPUT = re.compile(r'"(?:output|text)": "([^"\\]*)"')
STEERING = "note from "


@attrs.frozen
class Files:
    """A cell's files, all in one folder."""

    folder: Path

    @property
    def db(self) -> Path:
        return self.folder / "ckpt.db"

    @property
    def ledger(self) -> Path:
        return self.folder / "audit.ledger"

    @property
    def timeline(self) -> Path:
        return self.folder / "timeline"


def note(files: Files, line: str) -> None:
    """Append ``line`` to the timeline (one ``write``, in order with the trace)."""
    fd = os.open(files.timeline, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line.replace("\n", " ") + "\n").encode())
    finally:
        os.close(fd)


@attrs.frozen
class Text:
    """A typed agent's output."""

    text: str


@attrs.define(eq=False)
class Env:
    """What the tools of one process share: the root task once known."""

    files: Files
    root: Task | None = None
    root_ready: trio.Event = attrs.Factory(trio.Event)
    root_done: trio.Event = attrs.Factory(trio.Event)


def _task_of(request: ModelRequest) -> str:
    return next(m.content or "" for m in request.messages if m.role == "user")


def answer(request: ModelRequest) -> str:
    """``TASK done[...]``: the child outputs in the conversation, sorted, and
    ``+steered`` if a steering message reached it."""
    task = _task_of(request)
    found: list[str] = []
    steered = False
    for m in request.messages:
        text = m.content or ""
        if m.role == "user" and text.startswith(STEERING):
            steered = True
        elif m.role in ("tool", "user") and text != task:
            found += _CHILD_OUTPUT.findall(text)
    return f"{task} done[{';'.join(sorted(found))}]" + ("+steered" if steered else "")


def _told(files: Files, request: ModelRequest) -> None:
    # Note ``told KEY`` for each call the conversation answers interrupted.
    keys = {c.id: c.arguments for m in request.messages for c in m.tool_calls}
    for m in request.messages:
        if m.role == "tool" and INTERRUPTED in m.content and m.tool_call_id in keys:
            arguments = json.loads(keys[m.tool_call_id])
            key = arguments.get("key") or f"delegate {arguments.get('task')}"
            note(files, f"told {key}")


def model(shape: Shape, name: str, files: Files) -> ScriptedModel:
    """``name``'s scripted model in ``shape``."""
    steps = shape.agents[name]
    typed = name in shape.typed

    def reply(request: ModelRequest) -> Message:
        _told(files, request)
        assistant = [m for m in request.messages if m.role == "assistant"]
        again = sum(1 for m in assistant if m.tool_calls and "-again-" in m.tool_calls[0].id)
        last = request.messages[-1]
        if last.role == "tool" and "call subagent_results again" in last.content:
            # A background child paused for approval had no result yet: as told.
            wait = ToolCall(f"{name}-again-{again}", "subagent_results", "{}")
            return Message("assistant", f"{name} waits again", tool_calls=[wait])
        n = len(assistant) - again
        task = _task_of(request)
        if n < len(steps):
            calls = []
            for k, call in enumerate(steps[n]):
                kind = call[0]
                if kind == "sub":
                    args: dict[str, object] = {"agent": call[1], "task": f"{task}/{call[1]}{n}.{k}",
                                               "wait": call[2]}
                    calls.append(ToolCall(f"{name}-{n}-{k}", "subagent", json.dumps(args)))
                elif kind == "results":
                    calls.append(ToolCall(f"{name}-{n}-{k}", "subagent_results", "{}"))
                else:
                    key = f"{task}#{n}.{k}"
                    calls.append(ToolCall(f"{name}-{n}-{k}", str(kind), json.dumps({"key": key})))
            return Message("assistant", f"{name} turn {n}", tool_calls=calls)
        if typed:
            body = json.dumps({"text": answer(request)}) if n > len(steps) else '{"text": 1}'
            return Message("assistant", "", tool_calls=[ToolCall(f"{name}-final-{n}",
                                                                   FINAL_RESULT, body)])
        return Message("assistant", answer(request))

    return ScriptedModel(reply)


def _tool(env: Env, kind: str, *, read_only: bool = False,
          idempotent: bool = False) -> FunctionTool:
    async def run(arguments: str) -> str:
        run_ = agentcore.current_run()
        call = agentcore.lowlevel.current_tool_call()
        assert run_ is not None and call is not None
        key = json.loads(arguments)["key"]
        if kind == "waitroot":
            await env.root_done.wait()
        elif kind == "steer":
            await env.root_ready.wait()
            assert env.root is not None
            with contextlib.suppress(agentcore.RunEndedError):
                env.root.steer(STEERING + key)
        note(env.files, f"effect {kind} {key} {run_.run_id} {call.id}")
        await trio.lowlevel.checkpoint()
        return f"{kind} ok"

    return FunctionTool(kind, f"{kind} something", {"type": "object"}, run,
                        read_only=read_only, idempotent=idempotent)


async def _defer_ask(request: agentcore.GateRequest) -> agentcore.GateDecision:
    await trio.lowlevel.checkpoint()
    if request.tool.name == "ask":
        return agentcore.GateDecision.defer("ask a human")
    return agentcore.GateDecision(True, "allowed")


def register(pool: Pool, shape: Shape, env: Env, sink: Sink) -> None:
    """``shape``'s specs in ``pool``, audited to ``sink``."""
    tools: list[agentcore.Tool] = [
        _tool(env, "write"), _tool(env, "ask"), _tool(env, "bump", idempotent=True),
        _tool(env, "look", read_only=True), _tool(env, "steer", idempotent=True),
        _tool(env, "waitroot", read_only=True),
        SubagentTool(pool), SubagentResultsTool(pool)]
    for name in shape.agents:
        budget = shape.budget.get(name)
        pool.register(Spec(
            name, model=model(shape, name, env.files), tools=tools, audit=sink, gate=_defer_ask,
            critical=name in shape.critical, output_type=Text if name in shape.typed else None,
            budget=None if budget is None else Budget(model_calls=budget)))


def _approve_all(files: Files, state: agentcore.RunState) -> None:
    # Each answer noted (``approved KEY``) before it is given: an answer asked for
    # again once its resume was claimed was lost (crashkit.check).
    for pending in state.pending_approvals:
        note(files, f"approved {json.loads(pending.arguments)['key']}")
        state.approve(pending.call_id, path=pending.path, by="harness")


async def finish(pool: Pool, files: Files, task: Task) -> str:
    """The output of ``task``, approving every call of each pause and resuming."""
    while True:
        try:
            return (await task.wait()).output
        except TaskPaused as exc:
            state = exc.state
            _approve_all(files, state)
            task = await pool.resume(state)


def _sink(shape: Shape, files: Files) -> Sink:
    if shape.ledger == "none":
        return MemorySink()
    return JsonlSink(files.ledger) if shape.ledger == "jsonl" else SqliteSink(files.ledger)


async def drive(shape: Shape, files: Files, phase: str, submitted: bool) -> None:
    """Run ``shape`` (``phase`` "run") or recover what a crash left ("recover"; the
    root is submitted again only if it was never acknowledged, ``submitted`` false,
    and the checkpoints hold no row of it, ended or not), noting the root's output;
    then, recovering, check that a second ``recover()`` finds nothing (``again N
    PAUSED FAILED``)."""
    env = Env(files)
    sink = _sink(shape, files)
    root_id = f"{shape.root}/0001"
    try:
        async with SqliteCheckpoints(files.db) as store, open_pool(checkpoints=store) as pool:
            register(pool, shape, env, sink)
            tasks: list[Task] = []
            if phase == "run":
                tasks.append(await pool.submit(shape.root, ROOT_TASK))
                note(files, "submitted")
            else:
                recovered = await pool.recover()
                for run_id, error in recovered.failed:
                    note(files, f"failed {run_id} {type(error).__name__}: {error}")
                tasks += recovered
                for tree in recovered.paused:
                    _approve_all(files, tree.state)
                    tasks.append(await pool.resume(tree.state, name=tree.name))
                # Its row, if any, says it was acknowledged (a recovery may have run it
                # to its end, its driver's note of the submit lost to the crash).
                if not tasks and not submitted and root_id not in await store.run_ids():
                    tasks.append(await pool.submit(shape.root, ROOT_TASK))
                    note(files, "submitted")
            for task in tasks:
                if task.path == (root_id,):
                    env.root = task
            env.root_ready.set()
            if env.root is None:
                env.root_done.set()
            for task in tasks:
                output = await finish(pool, files, task)
                if task.path == (root_id,):
                    note(files, f"output {output}")
                    env.root_done.set()
    finally:
        await sink.aclose()
    if phase == "recover":
        sink = _sink(shape, files)
        try:
            async with SqliteCheckpoints(files.db) as store, \
                    open_pool(checkpoints=store) as pool:
                register(pool, shape, Env(files), sink)
                again = await pool.recover()
                note(files, f"again {len(again)} {len(again.paused)} {len(again.failed)}")
                pool.cancel()
        finally:
            await sink.aclose()
