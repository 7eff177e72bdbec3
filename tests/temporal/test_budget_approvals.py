"""A budget's spend survives Temporal approvals (issue 32 item 3): the paused state the
activity hands the workflow holds it (``RunState.spent``), and the activity that
resumes it after the answer goes on from it. Before, each approval reset the meter:
``Budget(model_calls=2)`` paused again for every write, without end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs
import pytest
from temporalio.client import Client

from agentcore import ModelRequest
from agentcore.testing import ScriptedModel, ScriptItem
from subagent import Budget, SpecFile
from subagent.temporal import DevServer, PendingAnswers, Worker, approve, start

from .pausing import defer_writes, writer_tree
from .test_approvals import wait_paused
from .trees import _delegate, _reply, _tool_results


def _boss(request: ModelRequest) -> ScriptItem:
    # Delegates to scribe, then answers with what the delegation returned.
    results = _tool_results(request)
    if not results:
        return _reply("", _delegate("d1", "scribe", request.messages[-1].content))
    return _reply(f"boss: {results[-1].content}")


def _budgeted(log: Path) -> SpecFile:
    # scribe asks for five writes, each deferred; its budget allows two model calls.
    specs = writer_tree(log, writes=5)
    return attrs.evolve(specs, specs=tuple(
        attrs.evolve(s, budget=Budget(model_calls=2)) if s.name == "scribe"
        else attrs.evolve(s, model=ScriptedModel(_boss)) for s in specs.specs))


async def approvals(server: DevServer, folder: Path) -> tuple[PendingAnswers, str, str]:
    client = await Client.connect(server.address)
    log = folder / "writes.log"
    async with Worker(client, "budget", specs=lambda: _budgeted(log), gate=defer_writes,
                      ledger_dir=folder):
        handle = await start(client, "boss", "save", task_queue="budget", id="budgeted")
        first = await wait_paused(client, "budgeted")
        await approve(client, "budgeted", "w1", by="alice")
        async with asyncio.timeout(30):  # before: paused again at w2, never ended
            result = await handle.result()
        return first, result.status, result.output


@pytest.mark.slow
def test_an_approval_does_not_reset_the_budget(dev_server: DevServer, tmp_path: Path) -> None:
    first, status, output = asyncio.run(approvals(dev_server, tmp_path))
    assert [c.call_id for c in first.calls] == ["w1"]
    # The second model call reached the limit: no second pause, w1 written once.
    assert (status, output) == (
        "finished", "boss: tool 'subagent' failed: BudgetExceeded: task boss/0001/scribe/0002 "
        "spent its budget: model_calls 2 of 2, reached by a model call of "
        "boss/0001/scribe/0002")
    assert (tmp_path / "writes.log").read_text() == '{"text": "hello"}\n'
