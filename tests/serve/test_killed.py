"""A served pool with checkpoints killed (SIGKILL) between two answers of a tree
waiting on two calls (``_two_waiting``): the answer given before the kill is kept, in
the checkpoints and in the ledger; the new server lists only the other call, and once
it is answered each approved write runs exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

import ledger

from ._served import TOKEN, wait_for

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def _serving(folder: Path) -> AsyncIterator[tuple[trio.Process, httpx.AsyncClient]]:
    # The server in a process of its own, on the folder's files; killed at the end if
    # it still runs.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (folder / "stderr.txt").open("ab") as errors:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.serve._two_waiting", str(folder)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, env=env)
    assert proc.stdout is not None
    try:
        printed = b""
        with trio.fail_after(30):
            while b"\n" not in printed:
                printed += await proc.stdout.receive_some(4096)
        url = printed.decode().removeprefix("subagent serve: ").split("\n")[0].rstrip("/")
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            yield proc, client
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


@pytest.mark.slow
async def test_an_answer_given_before_the_server_is_killed_is_kept(tmp_path: Path) -> None:
    async with _serving(tmp_path) as (proc, client):
        await client.post("/api/tasks", json={"agent": "lead", "text": "go"})
        waiting = await wait_for(client, "/api/approvals", lambda d: len(d["approvals"]) == 2)
        assert sorted((a["call_id"], tuple(a["path"])) for a in waiting["approvals"]) == [
            ("c1", ("lead/0001",)), ("c2", ("lead/0001", "writer/0002"))]
        first = await client.post("/api/approvals/approve", json={
            "tree": "lead/0001", "call_id": "c1", "by": "ann"})
        assert first.json() == {"resumed": None, "waiting": 1}
        proc.kill()  # SIGKILL: nothing of the server runs once the answer returned
        assert await proc.wait() == -9
    assert not (tmp_path / "writes.log").exists()
    async with _serving(tmp_path) as (proc, client):
        listed = (await client.get("/api/approvals")).json()["approvals"]
        assert [(a["call_id"], a["path"]) for a in listed] == [
            ("c2", ["lead/0001", "writer/0002"])]
        second = await client.post("/api/approvals/approve", json={
            "tree": "lead/0001", "call_id": "c2", "by": "bob"})
        assert second.json() == {"resumed": "lead/0001", "waiting": 0}
        done = await wait_for(client, "/api/tasks/lead/0001",
                              lambda d: d["status"] == "finished")
        assert done["output"] == "lead done"
    assert sorted((tmp_path / "writes.log").read_text().splitlines()) == ["one", "two"]
    path = tmp_path / "l.jsonl"
    ledger.repair(path)  # the second server was killed too
    assert ledger.verify(path).ok
    answered = ledger.query(path, kind="answered")
    assert [(e.call_id, e.path, e.verdict, dict(e.data)) for e in answered] == [
        ("c1", ("lead/0001",), "allow", {"by": "ann"}),
        ("c2", ("lead/0001", "writer/0002"), "allow", {"by": "bob"})]
    approvals = ledger.query(path, kind="approval")
    assert sorted((e.call_id, e.verdict, dict(e.data)["by"]) for e in approvals) == [
        ("c1", "allow", "ann"), ("c2", "allow", "bob")]
