"""With checkpoints, a tree paused for approval survives a restart of the server:
the new server lists its call, an approval runs it once, the tree ends."""

from __future__ import annotations

from pathlib import Path

from ledger import MemorySink

from ._served import Notes, running, specs, wait_for


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
