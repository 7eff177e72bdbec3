"""Review attacks on RunState read from outside: what its errors quote is bounded."""

from __future__ import annotations

import pytest

from agentcore import CallStatus, PendingCall, RunState, RunStateError, ToolCall

from .test_runstate import paused_state


def test_unknown_id_error_cuts_the_waiting_ids_it_lists() -> None:
    # Before: each waiting id was quoted whole; a state file with megabyte-long
    # ids made an error (and a terminal line) of tens of megabytes.
    state = paused_state()
    long_id = "x" * 1_000_000
    state.pending.append(PendingCall(ToolCall(long_id, "write", "{}"), CallStatus.deferred))
    state = RunState.from_json(state.to_json())
    with pytest.raises(RunStateError) as info:
        state.approve("nope")
    assert str(info.value) == (
        "no deferred call with id 'nope'; waiting for an answer: 'c2', "
        f"{'x' * 200!r}... (1000000 characters)"
    )
