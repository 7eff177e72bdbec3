"""A record whose text field, tool name or call id is not a str is refused by every
sink with the encoder's TypeError, which names the field: never a raw error from the
redactor (an ``AttributeError`` on ``.lower()``, a ``re`` error on bytes)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import JsonlSink, MemorySink, Record, SqliteSink, redact_record

_TEXTS = ("tool", "call_id", "arguments", "result", "error", "reason")

_odd = st.one_of(
    st.integers(), st.floats(allow_nan=False), st.binary(max_size=4), st.booleans(),
    st.lists(st.text(max_size=2), max_size=2), st.tuples(st.text(max_size=2)),
)


def _message(field: str, value: Any) -> str:
    return f"an entry's {field} must be a str or None, not {type(value).__name__}"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(field=st.sampled_from(_TEXTS), value=_odd, secret=st.booleans())
def test_every_sink_refuses_a_text_field_that_is_not_a_str(
    field: str, value: Any, secret: bool
) -> None:
    # One odd field; the others hold ordinary text, or a secret (so redaction works).
    text = "key sk-proj-A1b2C3d4E5f6G7h8I9j0" if secret else "plain"
    record = Record("tool_result", "r", ("w",), "a", **{
        **{name: text for name in _TEXTS}, field: value,
    })
    expected = _message(field, value)
    with pytest.raises(TypeError) as caught:
        redact_record(record)
    assert str(caught.value) == expected

    async def main(folder: Path) -> None:
        memory = MemorySink()
        with pytest.raises(TypeError) as caught:
            await memory.record(record)
        assert str(caught.value) == expected
        with pytest.raises(TypeError) as caught:
            memory.record_nowait(record)
        assert str(caught.value) == expected
        with pytest.raises(TypeError) as caught:
            memory.record_fields_nowait(
                record.kind, record.run_id, record.path, record.agent_id, record.tool,
                record.call_id, record.arguments, record.verdict, record.reason,
                record.result, record.error, record.duration, None,
            )
        assert str(caught.value) == expected
        assert memory.entries == []
        for sink in (JsonlSink(folder / "a.jsonl"), SqliteSink(folder / "a.db")):
            with pytest.raises(TypeError) as caught:
                await sink.record(record)
            assert str(caught.value) == expected
            await sink.record(Record("run_end"))  # the sink goes on
            await sink.aclose()
            assert sink.statistics().recorded == 1

    with tempfile.TemporaryDirectory() as folder:
        trio.run(main, Path(folder))
