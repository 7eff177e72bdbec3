"""Review attacks on subagent.otel: what the model chooses is redacted before it is
exported, even with content capture off (as the ledger redacts tool names and ids)."""

from __future__ import annotations

import pytest
import trio.testing

from agentcore.testing import tool_call_reply
from subagent import Spec, open_pool
from subagent.otel import instrument

from .otel_helpers import NamedModel, memory_provider, pin_wall_clock

KEY = "sk-ant-api03-" + "k" * 40


async def test_a_key_in_a_tool_name_or_call_id_is_not_exported(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the span name, gen_ai.tool.name and gen_ai.tool.call.id carried the
    # model's text as is (only capped), so a key it echoed reached the backend.
    pin_wall_clock(monkeypatch)
    provider, exporter = memory_provider()
    async with open_pool() as pool:
        pool.register(Spec("a", model=NamedModel("m", [
            tool_call_reply(f"read {KEY}", "{}", id=f"id {KEY}"),
            "done",
        ])))
        instrument(pool, tracer_provider=provider)
        await (await pool.submit("a", "x")).wait()
    (tool,) = (s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool"))
    attributes = dict(tool.attributes or {})
    assert tool.name == "execute_tool read [REDACTED]"
    assert attributes["gen_ai.tool.name"] == "read [REDACTED]"
    assert attributes["gen_ai.tool.call.id"] == "id [REDACTED]"
    assert all(KEY not in str(v) for v in attributes.values())
