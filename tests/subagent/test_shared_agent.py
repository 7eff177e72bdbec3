"""The tasks of one spec share one Agent (issue 17, memory per parked run): an Agent
is configuration only, so building one per task cost each run its bytes and its
validation for nothing. One Agent per spec and depth class, dropped with the spec."""

from __future__ import annotations

import gc

import trio
import trio.testing

from agentcore.testing import Blocked, ScriptedModel
from subagent import Defaults, Spec, SubagentTool, open_pool
from subagent._pool import _lifecycle


async def test_tasks_of_one_spec_share_one_agent_per_depth_class() -> None:
    model = ScriptedModel([Blocked("never")] * 4)
    async with open_pool(max_depth=2, defaults=Defaults(model=model)) as pool:
        spec = Spec("a", tools=(SubagentTool(pool),))
        pool.register(spec)
        top = [await pool.submit("a", f"x{i}") for i in range(2)]
        nested = [
            await pool.submit("a", f"y{i}", parent_path=top[0].path) for i in range(2)
        ]
        await trio.testing.wait_all_tasks_blocked()
        agents = [task._run.agent for task in top + nested]  # type: ignore[union-attr]
        assert agents[0] is agents[1]
        assert agents[2] is agents[3]
        assert agents[0] is not agents[2]
        # Below the depth limit the delegation tool is offered; at the limit it is not.
        assert [t.name for t in agents[0].tools] == ["subagent"]
        assert agents[2].tools == ()
        assert agents[0].system_prompt == agents[2].system_prompt == _lifecycle.FRAMING
        pool.cancel()
    assert [t.status.value for t in top + nested] == ["cancelled"] * 4


async def test_a_spec_that_is_collected_takes_its_agent_with_it() -> None:
    spec = Spec("a")
    async with open_pool(defaults=Defaults(model=ScriptedModel(["done"]))) as pool:
        pool.register(spec)
        task = await pool.submit("a", "x")
    assert (await task.wait()).output == "done"
    resolved = task.spec  # the spec with the pool's defaults filled in
    key = id(resolved)
    entry = _lifecycle._agents[key]
    assert entry[0]() is resolved
    assert entry[1] is task._run.agent  # type: ignore[union-attr]
    del pool, task, resolved, entry
    gc.collect()
    assert key not in _lifecycle._agents
