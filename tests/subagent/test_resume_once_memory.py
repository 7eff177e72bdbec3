"""``Pool.resume`` without checkpoints refuses a paused state it resumed already
(issue 32 item 2): the pool remembers the resume keys it took, and forgets one whose
resume was not queued."""

from __future__ import annotations

import pytest

from agentcore import RunState
from subagent import AlreadyResumedError, TaskPaused, open_pool

from .test_recover_paused import asks_counted


async def test_the_same_state_is_not_resumed_twice_without_checkpoints() -> None:
    ran: list[str] = []
    async with open_pool() as pool:
        pool.register(asks_counted(ran))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("asks", "go")).wait()
        text = info.value.state.to_json()
        first = RunState.from_json(text)
        first.approve("c1", by="alice")
        assert (await (await pool.resume(first)).wait()).output == "done after 2 turns"
        assert ran == ['{"s": 0}', '{"s": 0}']
        again = RunState.from_json(text)
        again.approve("c1")
        # Before: this ran the approved call c1 a second time.
        with pytest.raises(AlreadyResumedError) as refused:
            await pool.resume(again)
        assert str(refused.value) == (
            "the paused run 'asks/0001' was resumed already from this state by this "
            "pool: resuming it again would run its approved calls again")
        assert ran == ['{"s": 0}', '{"s": 0}']
        assert pool.statistics().accepted == 2

