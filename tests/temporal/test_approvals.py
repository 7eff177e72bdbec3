"""Durable approvals: a child's deferred mutating call pauses the tree; the workflow
waits with no worker busy; an answer sent after the worker was replaced resumes the
run on the new worker; the approved call runs exactly once; the ledger verifies."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from temporalio.client import Client

import ledger
from subagent._cli._cli import main
from subagent.temporal import (
    ApprovalRequest,
    DevServer,
    NotPaused,
    PendingAnswers,
    RunOptions,
    UnknownCall,
    Worker,
    approve,
    deny,
    ledger_name,
    pending,
    start,
    tasks,
)

from .pausing import defer_writes, writer_tree

PAUSED = {"boss/0001": "paused", "boss/0001/scribe/0002": "paused"}
CALL = ApprovalRequest(["boss/0001", "scribe/0002"], "w1", "write", '{"text": "hello"}',
                   "ask a human")


async def wait_paused(client: Client, workflow_id: str) -> PendingAnswers:
    async with asyncio.timeout(30):
        while not (now := await pending(client, workflow_id)).paused:  # noqa: ASYNC110 (server state: polled)
            await asyncio.sleep(0.05)
    return now


async def cli(server: DevServer, *argv: str) -> str:
    """``subagent temporal ARGV... --address`` in a thread (it runs its own loop)."""
    out = io.StringIO()
    code = await asyncio.to_thread(main, ["temporal", *argv, "--address", server.address],
                                   out=out)
    assert code == 0
    return out.getvalue()


async def pause_and_answer(server: DevServer, folder: Path, approved: bool) -> str:
    log, wid, queue = folder / "writes.log", f"approvals-{approved}", f"approvals-{approved}"
    client = await Client.connect(server.address)

    def worker() -> Worker:
        return Worker(client, queue, specs=lambda: writer_tree(log), gate=defer_writes,
                      ledger_dir=folder)

    async with worker():
        handle = await start(client, "boss", "save", task_queue=queue, id=wid)
        assert await wait_paused(client, wid) == PendingAnswers(True, [CALL], [], 0)
        async with asyncio.timeout(30):
            while await tasks(client, wid) != PAUSED:  # noqa: ASYNC110 (server state)
                await asyncio.sleep(0.05)
        with pytest.raises(UnknownCall, match=r"^no deferred call with id 'w9'; waiting for "
                                              r"an answer: 'w1'$"):
            await approve(client, wid, "w9")
        assert await cli(server, "pending", wid) == (
            'w1  boss/0001/scribe/0002  write {"text": "hello"}  (ask a human)\n')
    assert not log.exists()  # the first worker is gone; nothing was written
    async with worker():  # a new worker: the answer resumes the run there
        if approved:
            assert await cli(server, "approve", wid, "w1", "--reason", "fine", "--by", "alice",
                             "--path", "boss/0001/scribe/0002") == "approve sent for w1\n"
        else:
            await deny(client, wid, "w1", reason="not today", by="bob")
        result = await handle.result()
        assert (await pending(client, wid)) == PendingAnswers(False, [], [], 1)
        with pytest.raises(NotPaused):
            await deny(client, wid, "w1")
    assert result.status == "finished"
    assert result.ledger == ledger_name(wid)
    return result.output


@pytest.mark.parametrize("approved", [True, False])
def test_an_answer_after_a_worker_restart_resumes_the_tree(
    dev_server: DevServer, tmp_path: Path, approved: bool
) -> None:
    output = asyncio.run(pause_and_answer(dev_server, tmp_path, approved))
    log = tmp_path / "writes.log"
    if approved:
        assert output == "boss: scribe: written"
        assert log.read_text() == '{"text": "hello"}\n'  # ran exactly once
    else:
        assert output == "boss: scribe: denied: not today"
        assert not log.exists()
    path = tmp_path / ledger_name(f"approvals-{approved}")
    report = ledger.verify(path)
    assert report.ok, report.message
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["path"] for e in entries if e["kind"] == "run_resumed"] == [
        ["boss/0001"], ["boss/0001", "scribe/0002"]]
    answers = [e for e in entries if e["kind"] == "approval"]
    assert len(answers) == 1
    assert [(a["path"], a["verdict"], a["reason"], a["data"]) for a in answers] == [(
        ["boss/0001", "scribe/0002"], "allow" if approved else "deny",
        "fine" if approved else "not today", {"by": "alice" if approved else "bob"})]


async def unanswered(server: DevServer, folder: Path) -> tuple[str, int]:
    client = await Client.connect(server.address)
    async with Worker(client, "timeout", specs=lambda: writer_tree(folder / "w.log", writes=2),
                      gate=defer_writes, ledger_dir=folder):
        handle = await start(client, "boss", "save", task_queue="timeout", id="unanswered",
                             options=RunOptions(approval_timeout=0.5))
        result = await handle.result()
        return result.output, (await pending(client, "unanswered")).round


@pytest.mark.slow
def test_the_approval_timeout_denies_unanswered_calls_and_a_run_may_pause_again(
    dev_server: DevServer, tmp_path: Path,
) -> None:
    output, rounds = asyncio.run(unanswered(dev_server, tmp_path))
    assert output == "boss: scribe: denied: no answer within 0.5 s"
    assert rounds == 2  # paused twice: w1, then w2 on the resumed run
    assert not (tmp_path / "w.log").exists()
    path = tmp_path / ledger_name("unanswered")
    assert ledger.verify(path).ok
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["call_id"], e["verdict"], e["data"]) for e in entries
            if e["kind"] == "approval"] == [("w1", "deny", {"by": "timeout"}),
                                            ("w2", "deny", {"by": "timeout"})]
