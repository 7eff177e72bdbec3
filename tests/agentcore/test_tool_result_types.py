"""A tool that returns something other than a str: a str subclass is the str it holds,
anything else is the tool's failure, said as one to the model, the events and the
audit (not an AuditError of the entry that would carry it, nor a non-str in the
model's next request)."""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Agent, EndReason, EventKind, FunctionTool
from agentcore.testing import ScriptedModel, tool_call_reply
from ledger import MemorySink
from tests.agentcore._support import Recorder


class Loud(str):
    def __str__(self) -> str:
        return "not what it holds"

    def lower(self) -> str:
        raise AssertionError("a str subclass's own methods ran")


_returns = st.one_of(
    st.none(), st.integers(), st.floats(allow_nan=False), st.binary(max_size=4),
    st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=3),
    st.integers(), max_size=2), st.text(max_size=12).map(Loud), st.text(max_size=12),
)


@given(returned=_returns)
def test_what_a_tool_returns_reaches_the_model_events_and_audit_as_text(returned: Any) -> None:
    async def main() -> None:
        async def tool_fn(_arguments: str) -> str:
            return returned  # type: ignore[no-any-return]

        sink = MemorySink()
        emit = Recorder()
        model = ScriptedModel([tool_call_reply("odd", id="c1"), "done"])
        tool = FunctionTool("odd", "returns anything", {"type": "object"}, tool_fn)
        result = await Agent(model=model, tools=[tool], audit=sink).run("go", emit=emit)
        assert result.summary.end_reason is EndReason.stop
        assert result.output == "done"
        if isinstance(returned, str):
            text, is_error = str.__str__(returned), False
        else:
            text = f"tool 'odd' failed: it returned {type(returned).__name__}, not str"
            is_error = True
        [sent] = [m for m in model.requests[1].messages if m.role == "tool"]
        assert type(sent.content) is str
        assert sent.content == text
        [end] = emit.of(EventKind.tool_end)
        assert (type(end.text), end.text) == (str, text)
        [entry] = [e for e in sink.entries if e.kind == "tool_result"]
        assert (entry.result, entry.error) == ((None, text) if is_error else (text, None))

    trio.run(main)
