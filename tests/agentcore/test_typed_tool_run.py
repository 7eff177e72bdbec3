"""``@tool`` inside an agent run: results and events, argument errors the model can act
on, sync functions bounded by ``tool_timeout`` (exact virtual times), and random
argument text that never escapes as an exception."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import (
    Agent,
    EndReason,
    EventKind,
    Message,
    ToolArgumentsError,
    ToolSpec,
    read_only,
    tool,
)
from agentcore.limits import MAX_TOOL_THREADS
from agentcore.testing import ScriptedModel, tool_call_reply
from tests.agentcore._support import Recorder

Clock = trio.testing.MockClock


@attrs.frozen
class Finding:
    """One finding."""

    path: str
    line: int
    severity: Literal["low", "high"] = "low"


@tool(read_only=True)
async def count_findings(
    findings: list[Finding], severity: Literal["low", "high"]
) -> dict[str, int]:
    """Count the findings of a severity.

    Args:
      findings: The findings to count.
      severity: The severity to count.
    """
    return {"count": sum(f.severity == severity for f in findings)}


async def test_agent_runs_a_typed_tool(autojump_clock: Clock) -> None:
    rec = Recorder()
    arguments = json.dumps({
        "findings": [{"path": "a.py", "line": 1, "severity": "high"}, {"path": "b.py", "line": 2}],
        "severity": "high",
    })
    model = ScriptedModel([tool_call_reply("count_findings", arguments, id="c1"), "one"])
    agent = Agent(model=model, tools=[count_findings], gate=read_only)
    result = await agent.run("count", emit=rec)
    assert result.output == "one"
    assert rec.kinds == [
        "agent_start", "turn_start", "model_request", "model_response",
        "tool_start", "gate_decision", "tool_end",
        "turn_start", "model_request", "model_response", "agent_end",
    ]
    (decision,) = rec.of(EventKind.gate_decision)
    assert decision.decision is not None and decision.decision.allowed
    (end,) = rec.of(EventKind.tool_end)
    assert (end.text, end.is_error) == ('{"count":1}', False)
    assert result.messages[-2] == Message("tool", '{"count":1}', tool_call_id="c1")
    assert model.requests[0].tools == (
        ToolSpec("count_findings", "Count the findings of a severity.", count_findings.parameters),
    )
    assert count_findings.parameters["properties"]["severity"] == {
        "description": "The severity to count.",
        "enum": ["high", "low"],
    }


async def test_invalid_arguments_give_an_error_result_the_model_retries_on(
    autojump_clock: Clock,
) -> None:
    rec = Recorder()
    model = ScriptedModel([
        tool_call_reply("count_findings", '{"findings": [{"path": "a.py"}], "severity": "high"}',
                        id="c1"),
        tool_call_reply("count_findings", '{"findings": [{"path": "a.py", "line": "2"}], '
                        '"severity": "high"}', id="c2"),
        tool_call_reply("count_findings", '{"findings": [], "severity": "medium"}', id="c3"),
        tool_call_reply("count_findings", '{"findings": [], "severity": "low"}', id="c4"),
        "none",
    ])
    result = await Agent(model=model, tools=[count_findings]).run("count", emit=rec)
    assert result.output == "none"
    assert result.summary.end_reason is EndReason.stop
    assert [(e.text, e.is_error) for e in rec.of(EventKind.tool_end)] == [
        (
            "tool 'count_findings' failed: ToolArgumentsError: invalid arguments: "
            "Object missing required field `line` - at `$.findings[0]`",
            True,
        ),
        (
            "tool 'count_findings' failed: ToolArgumentsError: invalid arguments: "
            "Expected `int`, got `str` - at `$.findings[0].line`",
            True,
        ),
        (
            "tool 'count_findings' failed: ToolArgumentsError: invalid arguments: "
            "Invalid enum value 'medium' - at `$.severity`",
            True,
        ),
        ('{"count":0}', False),
    ]
    assert result.summary.tool_errors == 3


def _wait_until_released(
    started: threading.Event, release: threading.Event, finished: threading.Event
) -> str:
    started.set()
    try:
        release.wait()
        return "released"
    finally:
        finished.set()


async def test_sync_tool_is_abandoned_at_tool_timeout(autojump_clock: Clock) -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    threads: list[int] = []

    @tool
    def stuck(label: str) -> str:
        """Block until released."""
        threads.append(threading.get_ident())
        return _wait_until_released(started, release, finished)

    model = ScriptedModel([tool_call_reply("stuck", '{"label": "x"}', id="c1"), "went on"])
    result = await Agent(model=model, tools=[stuck], tool_timeout=7).run("go")
    assert result.output == "went on"
    assert result.messages[-2] == Message(
        "tool", "tool 'stuck' timed out after 7s", tool_call_id="c1", is_error=True
    )
    assert result.summary.duration == 7.0
    assert trio.current_time() == 7.0
    # The abandoned thread runs on in a worker thread until released.
    await trio.to_thread.run_sync(started.wait)
    assert not finished.is_set()
    assert threads[0] != threading.get_ident()
    release.set()
    await trio.to_thread.run_sync(finished.wait)


async def test_sync_tool_result() -> None:
    # On trio's real clock: the autojump clock would jump to tool_timeout while the
    # worker thread runs, however fast it is.
    @tool
    def double(n: int) -> int:
        """Double n."""
        return 2 * n

    model = ScriptedModel([tool_call_reply("double", '{"n": 21}', id="c1"), "42"])
    result = await Agent(model=model, tools=[double]).run("go")
    assert result.messages[-2] == Message("tool", "42", tool_call_id="c1")


async def test_async_tool_is_cancelled_at_tool_timeout(autojump_clock: Clock) -> None:
    cancelled: list[float] = []

    @tool
    async def slow(seconds: float) -> str:
        """Sleep."""
        try:
            await trio.sleep(seconds)
        except trio.Cancelled:
            cancelled.append(trio.current_time())
            raise
        return "slept"

    model = ScriptedModel([
        tool_call_reply("slow", '{"seconds": 3}', id="c1"),
        tool_call_reply("slow", '{"seconds": 60}', id="c2"),
        "done",
    ])
    result = await Agent(model=model, tools=[slow], tool_timeout=10).run("go")
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "slept", "tool 'slow' timed out after 10s"
    ]
    assert cancelled == [13.0]
    assert result.summary.duration == 13.0


async def test_stuck_threads_are_bounded(autojump_clock: Clock) -> None:
    # MAX_TOOL_THREADS abandoned threads hold the typed tools' limiter: a call more
    # waits for a thread (within its own deadline) instead of starting another.
    release, done = threading.Event(), threading.Semaphore(0)
    ran: list[int] = []

    @tool
    def hang(n: int) -> str:
        """Hang."""
        ran.append(n)
        try:
            release.wait()
        finally:
            done.release()
        return "done"

    async with trio.open_nursery() as nursery:
        for k in range(MAX_TOOL_THREADS):
            nursery.start_soon(_call_for, hang, k, 1.0)
    assert trio.current_time() == 1.0
    with trio.move_on_after(5) as scope:
        await hang.execute('{"n": -1}')
    assert scope.cancelled_caught
    assert trio.current_time() == 6.0
    release.set()
    for _ in range(MAX_TOOL_THREADS):
        await trio.to_thread.run_sync(done.acquire)
    assert sorted(ran) == list(range(MAX_TOOL_THREADS))


async def _call_for(typed: Any, n: int, seconds: float) -> None:
    with trio.move_on_after(seconds) as scope:
        await typed.execute(json.dumps({"n": n}))
    assert scope.cancelled_caught


# Every error result a bad argument text may get: from the loop's own checks (not a
# JSON object, past a bound) or from the typed tool, naming a path or a field.
_ERROR = re.compile(
    r"invalid JSON arguments for tool 'pick': .*"
    r"|arguments for tool 'pick' must be a JSON object, not \w+"
    r"|tool 'pick': arguments (too large|nested too deeply) .*"
    r"|tool 'pick' failed: ToolArgumentsError: invalid JSON arguments: .*"
    r"|tool 'pick' failed: ToolArgumentsError: invalid arguments: "
    r"(.* - at `\$[^`]*`|.*field `.*)",
    re.DOTALL,
)

_FIELDS = ["name", "count", "tags", "mode", "finding"]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["path", "line", *_FIELDS]) | st.text(max_size=4), inner,
                      max_size=4),
    max_leaves=12,
)
# Objects near the parameters: each field valid or any JSON, sometimes one unknown.
_near = st.fixed_dictionaries(
    {"name": st.text(max_size=4) | _json, "count": st.integers() | _json},
    optional={
        "tags": st.lists(st.text(max_size=3), max_size=3) | _json,
        "mode": st.sampled_from(["a", "b", "c"]) | _json,
        "finding": st.fixed_dictionaries(
            {"path": st.text(max_size=3), "line": st.integers()},
            optional={"severity": st.sampled_from(["low", "high", "mid"])},
        ) | _json,
        "other": _json,
    },
).map(json.dumps)
_arguments = st.one_of(
    st.text(max_size=40),
    _json.map(json.dumps),
    _near,
    st.tuples(_near, st.integers(0, 60)).map(lambda t: t[0][: t[1]]),  # cut short
)


@pytest.mark.slow
@given(st.data())
def test_random_argument_text_gets_a_result_never_an_exception(data: st.DataObject) -> None:
    calls: list[tuple[Any, ...]] = []

    @tool
    async def pick(
        name: str,
        count: int,
        tags: list[str] = [],  # noqa: B006
        mode: Literal["a", "b"] = "a",
        finding: Finding | None = None,
    ) -> str:
        """Pick."""
        calls.append((name, count, tags, mode, finding))
        return "picked"

    async def main() -> None:
        for _ in range(3):
            text = data.draw(_arguments)
            calls.clear()
            model = ScriptedModel([tool_call_reply("pick", text, id="c1"), "end"])
            result = await Agent(model=model, tools=[pick]).run("go")
            assert result.exception is None
            assert result.summary.end_reason is EndReason.stop
            message = result.messages[-2]
            if message.is_error:
                assert _ERROR.fullmatch(message.content), message.content
                assert calls == []
            else:
                assert message.content == "picked"
                assert len(calls) == 1

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


_WRONG: dict[str, st.SearchStrategy[Any]] = {
    "name": st.none() | st.booleans() | st.integers() | st.lists(st.text(), max_size=2),
    "count": st.none() | st.text() | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.integers(), max_size=2),
    "tags": st.text() | st.integers() | st.dictionaries(st.text(max_size=2), st.text(),
                                                        max_size=2),
    "mode": st.text().filter(lambda s: s not in ("a", "b")) | st.integers(),
}


@pytest.mark.slow
@given(st.data())
def test_a_wrong_value_is_named_by_its_path(data: st.DataObject) -> None:
    @tool
    async def pick(name: str, count: int, tags: list[str] = [],  # noqa: B006
                   mode: Literal["a", "b"] = "a") -> str:
        """Pick."""
        return "picked"

    field = data.draw(st.sampled_from(sorted(_WRONG)))
    value = data.draw(_WRONG[field])
    arguments: dict[str, Any] = {"name": "n", "count": 1, field: value}
    text = json.dumps(arguments)

    async def main() -> None:
        with pytest.raises(ToolArgumentsError) as info:
            await pick.execute(text)
        assert str(info.value).endswith(f" - at `$.{field}`"), str(info.value)

    trio.run(main)


def test_the_example_runs() -> None:
    root = Path(__file__).resolve().parent.parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "typed_tools.py")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-4:] == [
        "  count_lines -> ok: 3",
        "  file_findings -> error: tool 'file_findings' failed: ToolArgumentsError: invalid "
        "arguments: Expected `int`, got `str` - at `$.findings[0].line`",
        '  file_findings -> ok: {"low":0,"high":1}',
        "output: Filed one high-severity finding.",
    ]
