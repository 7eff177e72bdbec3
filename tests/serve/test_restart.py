"""With checkpoints, a tree paused for approval survives a restart of the server:
the new server lists its call, an approval runs it once, the tree ends; what the tree
spent of the pool's budget is still spent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

import agentcore
import subagent
from agentcore import ModelRequest, ModelResponse
from ledger import MemorySink

from ._served import Notes, running, specs, tree_specs, wait_for


async def test_a_restart_between_the_pause_and_the_approval_loses_nothing(
    tmp_path: Path,
) -> None:
    notes, audit = Notes(), MemorySink()
    checkpoints = tmp_path / "serve.ckpt"
    async with (
        running(specs(notes), checkpoints=checkpoints, audit=audit) as served,
        served.client() as client,
    ):
        await client.post("/api/tasks", json={"agent": "writer", "text": "write"})
        before = await wait_for(client, "/api/approvals", lambda d: d["approvals"])
    # The server stopped with the tree paused; a new one opens the same checkpoints.
    async with (
        running(specs(notes), checkpoints=checkpoints, audit=audit) as served,
        served.client() as client,
    ):
        after = (await client.get("/api/approvals")).json()
        assert after == before
        assert after["approvals"][0]["arguments"] == '{"text": "hello"}'
        tasks = (await client.get("/api/tasks")).json()["tasks"]
        assert [(t["id"], t["status"]) for t in tasks] == [("writer/0001", "paused")]
        tree = (await client.get("/api/tree")).json()
        assert [(r["path"], r["status"]) for r in tree["runs"]] == [
            (["writer/0001"], "paused")]
        answer = {"tree": "writer/0001", "call_id": "w1", "by": "carol"}
        ok = await client.post("/api/approvals/approve", json=answer)
        assert ok.json() == {"resumed": "writer/0001", "waiting": 0}
        again = await client.post("/api/approvals/approve", json=answer)
        assert again.status_code == 409
        done = await wait_for(client, "/api/tasks/writer/0001",
                              lambda d: d["status"] == "finished")
        assert done["output"] == "done: wrote hello"
    assert notes.written == ["hello"]
    # A third start finds nothing waiting and runs nothing again.
    async with (
        running(specs(notes), checkpoints=checkpoints, audit=audit) as served,
        served.client() as client,
    ):
        assert (await client.get("/api/approvals")).json() == {"approvals": []}
        assert (await client.get("/api/tasks")).json() == {"tasks": []}
    assert notes.written == ["hello"]
    assert [(e.verdict, dict(e.data)) for e in audit.entries if e.kind == "approval"] == [
        ("allow", {"by": "carol"})]


@attrs.define
class Counted:
    """A model that counts its calls in ``calls``, by the run that made them."""

    model: Any
    calls: list[str]

    async def complete(self, request: ModelRequest) -> ModelResponse:
        run = agentcore.current_run()
        self.calls.append("/".join(run.path) if run is not None else "")
        response: ModelResponse = await self.model.complete(request)
        return response


async def test_a_restart_keeps_what_a_paused_tree_spent_of_the_pools_budget(
    tmp_path: Path,
) -> None:
    # Budget(model_calls=3): lead and writer spend 2 before the pause; after the
    # restart a new task's call is the 3rd, which spends the budget: it fails, and the
    # tree can no longer be resumed. Three calls in all, in both processes.
    calls: list[str] = []

    def counted(pool: subagent.Pool) -> list[subagent.Spec]:
        return [attrs.evolve(s, model=Counted(s.model, calls))
                for s in tree_specs(Notes(), "hi")(pool)]

    checkpoints = tmp_path / "serve.ckpt"
    budget = subagent.Budget(model_calls=3)
    async with (
        running(counted, checkpoints=checkpoints, budget=budget) as served,
        served.client() as client,
    ):
        await client.post("/api/tasks", json={"agent": "lead", "text": "write"})
        await wait_for(client, "/api/approvals", lambda d: d["approvals"])
        spent = {"model_calls": {"limit": 3, "spent": 2, "left": 1}}
        assert (await client.get("/api/stats")).json()["budget"] == spent
    async with (
        running(counted, checkpoints=checkpoints, budget=budget) as served,
        served.client() as client,
    ):
        assert (await client.get("/api/stats")).json()["budget"] == spent
        await client.post("/api/tasks", json={"agent": "talker", "text": "x"})
        ended = await wait_for(client, "/api/tasks/talker/0003",
                               lambda d: d["status"] not in ("queued", "running"))
        assert (ended["status"], ended["error"]) == (
            "failed", "task talker/0003 stopped: the pool spent its budget: model_calls 3 "
            "of 3, reached by a model call of talker/0003")
        refused = await client.post("/api/approvals/approve",
                                    json={"tree": "lead/0001", "call_id": "w1"})
        assert refused.status_code == 409
        assert refused.json() == {"error": (
            "the tree cannot be resumed: the pool spent its budget: model_calls 3 of 3, "
            "reached by a model call of talker/0003")}
        assert (await client.get("/api/stats")).json()["budget"] == {
            "model_calls": {"limit": 3, "spent": 3, "left": 0}}
    assert calls == ["lead/0001", "lead/0001/writer/0002", "talker/0003"]
