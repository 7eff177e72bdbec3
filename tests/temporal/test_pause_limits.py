"""The bounds of a paused state on Temporal, and the workflow's answer books."""

from __future__ import annotations

import re

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from agentcore import RunState
from subagent import Spec, TaskPaused, open_pool
from subagent.temporal import Answer, ApprovalRequest, StateTooLarge
from subagent.temporal._approvals import MAX_STATE_BYTES, Approvals, answer_problem
from subagent.temporal._paused import encode_pause, resumed_state
from tests.agentcore._durable import gate, make_tool, model


async def paused_state(task_text: str) -> RunState:
    async with open_pool() as pool:
        pool.register(Spec("w", model=model([[["c1", "write", 0]]]),
                           tools=[make_tool("write", False)], gate=gate("c1", None)))
        with pytest.raises(TaskPaused) as info:
            await (await pool.submit("w", task_text)).wait()
        return info.value.state


async def test_a_state_within_the_bound_round_trips(autojump_clock: trio.testing.MockClock,
                                                    ) -> None:
    state = await paused_state("go")
    text, calls = encode_pause(state)
    assert calls == [ApprovalRequest(["w/0001"], "c1", "write", '{"s": 0}', "ask a human")]
    again = resumed_state(text, [Answer("c1", False, "no", "bob", ["w/0001"])])
    assert again.pending_approvals == ()


async def test_a_state_over_the_bound_is_refused(autojump_clock: trio.testing.MockClock,
                                                 ) -> None:
    state = await paused_state("x" * MAX_STATE_BYTES)
    with pytest.raises(StateTooLarge) as info:
        encode_pause(state)
    size = int(re.findall(r"\d+", str(info.value))[0])
    assert size > MAX_STATE_BYTES
    assert str(info.value) == (
        f"the paused run's state is {size} bytes, over the 1048576 bytes a paused state "
        "may take on Temporal (Temporal refuses payloads over 2 MiB); it cannot wait for "
        "approval there: shorten the conversation (Spec.max_messages) or approve in-process")


def test_answers_out_of_bounds_are_refused() -> None:
    assert answer_problem(Answer("w1", True, "x" * 4097)) == (
        "the reason is longer than 4096 characters")
    assert answer_problem(Answer("w1", True, by="b" * 257)) == (
        "'by' is longer than 256 characters")
    assert answer_problem(Answer("w1", True, path=["p"] * 65)) == "the path is not an AgentPath"
    assert answer_problem(Answer("w1", True, "ok", "alice", ["a/0001"])) is None


CALLS = [ApprovalRequest(["a/0001"], "c1", "t", "{}", "r"),
         ApprovalRequest(["a/0001"], "c2", "t", "{}", "r"),
         ApprovalRequest(["a/0001", "b/0002"], "c1", "t", "{}", "r")]
ANSWER = st.builds(Answer, st.sampled_from(["c1", "c2", "c3"]), st.booleans(),
                   st.sampled_from(["", "why"]), st.just("x"),
                   st.sampled_from([None, ["a/0001"], ["a/0001", "b/0002"], ["z/0009"]]))


@given(st.lists(ANSWER, max_size=12))
def test_the_books_record_an_answer_only_for_exactly_one_call(answers: list[Answer]) -> None:
    books = Approvals(list(CALLS), 0)
    last: dict[int, bool] = {}
    for answer in answers:
        found = [i for i, c in enumerate(CALLS) if c.call_id == answer.call_id
                 and (answer.path is None or answer.path == c.path)]
        assert books.record(answer) is (len(found) == 1)
        if len(found) == 1:
            last[found[0]] = answer.approved
    assert books.complete() is (len(last) == 3)
    assert [(a.call_id, a.path, a.approved) for a in books.in_order()] == [
        (CALLS[i].call_id, CALLS[i].path, last[i]) for i in sorted(last)]
