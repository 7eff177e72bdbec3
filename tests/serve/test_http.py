"""subagent serve over real sockets: a Hypercorn server on 127.0.0.1 in process on
trio, driven by an HTTP client: submit, events (a dropped stream resumed with
Last-Event-ID loses nothing), approve (twice: runs once), deny, cancel, and the
requests it refuses."""

from __future__ import annotations

import json

import httpx
import trio

import subagent
from agentcore.testing import Blocked, ScriptedModel
from ledger import MemorySink

from ._raw import post_big, read_events
from ._served import TOKEN, Notes, running, specs, tree_specs, wait_for


def _finished(task_id: str) -> object:
    return lambda data: data["status"] not in ("queued", "running")


async def test_submit_then_status_and_result() -> None:
    async with running(specs(Notes())) as served, served.client() as client:
        response = await client.post("/api/tasks", json={"agent": "talker", "text": "hi"})
        assert response.status_code == 201
        assert response.json()["id"] == "talker/0001"
        done = await wait_for(client, "/api/tasks/talker/0001", _finished("talker/0001"))
        assert done == {"id": "talker/0001", "agent": "talker", "status": "finished",
                        "output": "plain answer", "error": None,
                        "usage": {"input_tokens": 0, "output_tokens": 0, "cost": None}}
        assert (await client.get("/api/agents")).json() == {"agents": ["talker", "writer"]}
        unknown = await client.post("/api/tasks", json={"agent": "nobody", "text": "hi"})
        assert unknown.status_code == 404
        assert "nobody" in unknown.json()["error"]
        history = [{"role": "user", "content": "earlier"},
                   {"role": "assistant", "content": "noted"}]
        with_history = await client.post(
            "/api/tasks", json={"agent": "talker", "text": "go on", "history": history})
        assert with_history.status_code == 201
        bad = await client.post("/api/tasks", json={"agent": "talker", "text": "x",
                                                    "history": [{"role": "wizard"}]})
        assert bad.status_code == 400
        stats = (await client.get("/api/stats")).json()
        assert stats["pool"]["accepted"] == 2
        assert stats["budget"] is None


async def test_statistics_show_the_tree_and_the_budget_left() -> None:
    budget = subagent.Budget(tokens=10_000, model_calls=10, tasks=5)
    notes = Notes()
    async with running(tree_specs(notes, "hi"), budget=budget) as served, \
            served.client() as client:
        await client.post("/api/tasks", json={"agent": "talker", "text": "x"})
        await wait_for(client, "/api/tasks/talker/0001", lambda d: d["status"] == "finished")
        stats = (await client.get("/api/stats")).json()
        assert stats["budget"] == {
            "tokens": {"limit": 10_000, "spent": 1280, "left": 8720},
            "model_calls": {"limit": 10, "spent": 1, "left": 9},
            "tasks": {"limit": 5, "spent": 1, "left": 4}}
        assert stats["pool"]["finished"] == 1
        assert stats["server"]["waiting_trees"] == 0
        tree = (await client.get("/api/tree")).json()
        assert tree == {
            "runs": [{"path": ["talker/0001"], "agent": "talker", "status": "done", "turn": 1,
                      "input_tokens": 1200, "output_tokens": 80, "cost": 0.0021,
                      "activity": ""}],
            "trees": [{"root": "talker/0001", "runs": 1, "input_tokens": 1200,
                       "output_tokens": 80, "cost": 0.0021}]}


async def test_a_dropped_event_stream_resumed_with_last_event_id_loses_nothing() -> None:
    async with running(specs(Notes())) as served, served.client() as client:
        for _ in range(3):
            assert (await client.post("/api/tasks", json={"agent": "talker",
                                                          "text": "x"})).status_code == 201
        for n in (1, 2, 3):
            await wait_for(client, f"/api/tasks/talker/000{n}", _finished(""))
        last = served.app.hub.log.last_id
        everything = await read_events(served.url, limit=last)
        ids = [int(i.split("-")[1]) for i, _, _ in everything]
        assert ids == list(range(1, last + 1))
        assert all(event == "event" and data["path"] for _, event, data in everything)
        # Dropped after 5 events, resumed from the last id it saw: the rest, no gap.
        first = await read_events(served.url, limit=5)
        rest = await read_events(served.url, last_id=first[-1][0], limit=last - 5)
        assert [i for i, _, _ in first + rest] == [i for i, _, _ in everything]
        assert [d for _, _, d in first + rest] == [d for _, _, d in everything]
        assert served.app.hub.statistics().dropped == 0
        # A task's own stream carries the events of its tree only.
        own = await read_events(served.url, limit=3, path="/api/events?task=talker/0002")
        assert {tuple(d["path"]) for _, _, d in own} == {("talker/0002",)}


async def test_approve_runs_the_call_once_even_when_given_twice() -> None:
    notes, audit = Notes(), MemorySink()
    async with running(specs(notes), audit=audit) as served, served.client() as client:
        await client.post("/api/tasks", json={"agent": "writer", "text": "write"})
        await wait_for(client, "/api/tasks/writer/0001", lambda d: d["status"] == "paused")
        approvals = (await client.get("/api/approvals")).json()["approvals"]
        assert approvals == [{
            "tree": "writer/0001", "agent": "writer", "path": ["writer/0001"],
            "call_id": "w1", "tool": "write_note", "arguments": '{"text": "hello"}',
            "reason": "tool 'write_note' may change things: approve it on the page"}]
        assert notes.written == []
        answer = {"tree": "writer/0001", "call_id": "w1", "by": "alice", "reason": "fine"}
        answers: list[httpx.Response] = []

        async def tab() -> None:
            answers.append(await client.post("/api/approvals/approve", json=answer))

        async with trio.open_nursery() as nursery:  # two tabs click at once
            nursery.start_soon(tab)
            nursery.start_soon(tab)
        assert sorted(r.status_code for r in answers) == [200, 409]
        ok = next(r for r in answers if r.status_code == 200)
        assert ok.json() == {"resumed": "writer/0001", "waiting": 0}
        late = next(r for r in answers if r.status_code == 409)
        assert "resumed already" in late.json()["error"]
        done = await wait_for(client, "/api/tasks/writer/0001", _finished(""))
        assert (done["status"], done["output"]) == ("finished", "done: wrote hello")
        assert notes.written == ["hello"]
        assert (await client.get("/api/approvals")).json() == {"approvals": []}
        tree = (await client.get("/api/tree")).json()
        assert [(r["path"], r["status"]) for r in tree["runs"]] == [(["writer/0001"], "done")]
    approvals = [e for e in audit.entries if e.kind == "approval"]
    assert [(e.call_id, e.verdict, e.reason, dict(e.data)) for e in approvals] == [
        ("w1", "allow", "fine", {"by": "alice"})]


async def test_deny_gives_the_model_the_reason_and_runs_nothing() -> None:
    notes, audit = Notes(), MemorySink()
    async with running(specs(notes), audit=audit) as served, served.client() as client:
        await client.post("/api/tasks", json={"agent": "writer", "text": "write"})
        await wait_for(client, "/api/approvals", lambda d: d["approvals"])
        missing = await client.post("/api/approvals/deny",
                                    json={"tree": "writer/0001", "call_id": "nope"})
        assert missing.status_code == 404
        denied = await client.post("/api/approvals/deny", json={
            "tree": "writer/0001", "call_id": "w1", "reason": "not today", "by": "bob"})
        assert denied.status_code == 200
        done = await wait_for(client, "/api/tasks/writer/0001", _finished(""))
        assert done["output"] == "done: denied: not today"
        assert notes.written == []
    assert [(e.verdict, e.reason, dict(e.data)) for e in audit.entries
            if e.kind == "approval"] == [("deny", "not today", {"by": "bob"})]


async def test_cancel_a_running_task() -> None:
    blocked = subagent.Spec("stuck", "Waits.", model=ScriptedModel([Blocked("never")]))
    async with running([blocked]) as served, served.client() as client:
        await client.post("/api/tasks", json={"agent": "stuck", "text": "wait"})
        await wait_for(client, "/api/tasks/stuck/0001", lambda d: d["status"] == "running")
        response = await client.post("/api/tasks/stuck/0001/cancel", json={})
        assert response.status_code == 200
        done = await wait_for(client, "/api/tasks/stuck/0001", _finished(""))
        assert done["status"] == "cancelled"
        again = await client.post("/api/tasks/stuck/0001/cancel", json={})
        assert (again.status_code, again.json()) == (
            409, {"error": "task 'stuck/0001' is cancelled: nothing to cancel"})
        assert (await client.post("/api/tasks/nope/0009/cancel", json={})).status_code == 404


async def test_requests_without_the_token_or_from_another_origin_are_refused() -> None:
    async with running(specs(Notes())) as served:
        async with served.client(token=None) as anonymous:
            for method, path in (("GET", "/api/tasks"), ("GET", "/api/events"),
                                 ("POST", "/api/tasks")):
                response = await anonymous.request(method, path, json={"agent": "talker",
                                                                       "text": "x"})
                assert response.status_code == 401, path
                assert response.headers["www-authenticate"] == 'Bearer realm="subagent"'
            page = await anonymous.get("/")
            assert page.status_code == 200
            assert "script-src 'self'" in page.headers["content-security-policy"]
            assert TOKEN not in page.text
        for wrong in ("wrong", TOKEN + "x", TOKEN[:-1]):
            async with served.client(token=wrong) as client:
                assert (await client.get("/api/tasks")).status_code == 401
        async with served.client(token=None, Authorization=f"Basic {TOKEN}") as client:
            assert (await client.get("/api/tasks")).status_code == 401
        async with served.client(Origin="http://evil.example") as client:
            response = await client.post("/api/tasks", json={"agent": "talker", "text": "x"})
            assert response.json() == {"error": "cross-origin request refused"}
            assert response.status_code == 403
        async with served.client(Origin=served.url) as client:
            ok = await client.post("/api/tasks", json={"agent": "talker", "text": "x"})
            assert ok.status_code == 201
            form = await client.post("/api/tasks", content=b"agent=talker",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
            assert form.status_code == 415
        refused = (413, b'{"error":"the request body is over 1048576 bytes"}')
        assert await post_big(served.url, "/api/tasks", 40, 65536) == refused
        assert await post_big(served.url, "/api/tasks", 40, 65536, declared=True) == refused
        assert served.pool.statistics().accepted == 1


async def test_a_slow_event_reader_never_blocks_the_pool() -> None:
    # A reader that reads nothing, on a small receive buffer: the server's writes to it
    # block once the socket's buffers are full; the pool's tasks all end regardless,
    # and the events that reader fell behind on are dropped for it and said.
    big = "y" * 4000
    talkers = [subagent.Spec("talker", "Answers.", model=ScriptedModel(lambda r: big))]
    async with running(talkers, max_events=200, max_concurrent=16) as served:
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        sock = trio.socket.socket()
        sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 4096)
        await sock.connect((host, int(port)))
        slow = trio.SocketStream(sock)
        await slow.send_all(f"GET /api/events HTTP/1.1\r\nHost: {host}\r\n"
                            f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        n = 1500
        async with served.client() as client:
            await wait_for(client, "/api/stats", lambda d: d["server"]["readers"] == 1)
            for _ in range(n):
                served.pool.submit_nowait("talker", big)
            stats = await wait_for(client, "/api/stats",
                                   lambda d: d["pool"]["finished"] == n)
            assert stats["server"]["readers"] == 1
            last = served.app.hub.log.last_id
            # Now read it all: the stream goes on to the last event, saying what it missed.
            received = b""
            with trio.fail_after(30):
                while f"-{last}\n".encode() not in received:
                    received += await slow.receive_some(1 << 20)
            await slow.aclose()
            dropped = [json.loads(line[6:]) for line in received.split(b"\n")
                       if line.startswith(b"data: {\"missed\"")]
            assert dropped, "the slow reader was never told it missed events"
            total = dropped[-1]["dropped"]
            sent = received.count(b"\nevent: event\n")
            assert sent + total == last
            stats = await wait_for(client, "/api/stats", lambda d: d["server"]["readers"] == 0)
            assert stats["server"]["dropped"] == total
