"""``--approve``: one question at a time, on one line, the answer applied to the call shown.

The answers come through a real pipe (or a pseudo-terminal) read by the event loop.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from agentcore import FunctionTool, GateDecision, GateRequest, ToolCall
from subagent._cli._terminal import (
    MAX_ANSWER_BYTES,
    Screen,
    TerminalAnswers,
    TerminalApproval,
    approval_question,
)


async def noop(arguments: str) -> str:
    return arguments


def request(tool: str, arguments: str, path: tuple[str, ...] = ("boss/0001",)) -> GateRequest:
    return GateRequest(path, FunctionTool(tool, "", {"type": "object"}, noop),
                       ToolCall("c1", tool, arguments))


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):  # a test closed it already
            os.close(fd)


def test_the_question_is_one_escaped_capped_line() -> None:
    arguments = '{"path":\n\r"a.txt", "content": "\u202egnp.exe\x1b[2J"}' + "x" * 600
    question = approval_question(request("write\nfile", arguments, ("boss/0001", "w\x1b/0002")),
                                 max_shown=60)
    assert question == (
        'allow boss/0001/w\\x1b/0002 to call write\\nfile {"path":\\n\\r"a.txt", '
        '"content": "\\u202egnp.exe\\x1b[2J"}xxxxx… (50 of 645 characters shown)? [y/N] '
    )


async def test_two_pending_questions_are_asked_in_turn(pipe: tuple[int, int]) -> None:
    r, w = pipe
    out = io.StringIO()
    screen = Screen(out)
    gate = TerminalApproval(screen, TerminalAnswers(r))
    decisions: dict[str, GateDecision] = {}

    async def ask(tool: str, path: tuple[str, ...]) -> None:
        decisions[tool] = await gate(request(tool, '{"path": "x"}', path))

    first = 'allow boss/a/0002 to call write_a {"path": "x"}? [y/N] '
    second = 'allow boss/b/0003 to call write_b {"path": "x"}? [y/N] '
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "write_a", ("boss", "a/0002"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "write_b", ("boss", "b/0003"))
        await trio.testing.wait_all_tasks_blocked()
        screen.line("an event while asking")  # held back: nothing splits the question
        assert out.getvalue() == first  # the second question waits for the first answer
        os.write(w, b"n\n")
        await trio.testing.wait_all_tasks_blocked()
        assert decisions == {"write_a": GateDecision(False, "the approver refused tool 'write_a'")}
        assert out.getvalue() == first + "n\nan event while asking\n" + second
        os.write(w, b"y\n")
    assert decisions["write_b"] == GateDecision(True, "approved")
    assert out.getvalue() == first + "n\nan event while asking\n" + second + "y\n"


async def test_answers_in_one_write_go_one_per_question(pipe: tuple[int, int]) -> None:
    r, w = pipe
    out = io.StringIO()
    gate = TerminalApproval(Screen(out), TerminalAnswers(r))
    os.write(w, b"yes\nno\n\nY\n")
    shown = []
    for k in range(4):
        decision = await gate(request(f"t{k}", "{}"))
        shown.append(decision.allowed)
    assert shown == [True, False, False, True]
    os.close(w)
    assert await gate(request("t4", "{}")) == GateDecision(
        False, "no approval for tool 't4': the terminal's input is closed"
    )


async def test_an_unanswered_question_leaves_no_reader_behind(
    pipe: tuple[int, int], autojump_clock: trio.testing.MockClock
) -> None:
    # The old approver read with input() in an abandoned thread: after a timeout, that
    # thread took the next line, meant for the next question.
    r, w = pipe
    out = io.StringIO()
    gate = TerminalApproval(Screen(out), TerminalAnswers(r), timeout=60)
    assert await gate(request("first", "{}")) == GateDecision(
        False, "no approval for tool 'first' within 60s"
    )
    assert trio.current_time() == 60
    assert out.getvalue().endswith("? [y/N] \n(no answer within 60s: denied)\n")
    os.write(w, b"y\n")
    assert await gate(request("second", "{}")) == GateDecision(True, "approved")


async def test_a_cancelled_question_is_withdrawn(pipe: tuple[int, int]) -> None:
    r, w = pipe
    out = io.StringIO()
    gate = TerminalApproval(Screen(out), TerminalAnswers(r))
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gate, request("first", "{}"))
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert out.getvalue().endswith("? [y/N] \n(question withdrawn: the run ended)\n")
    os.write(w, b"y\n")
    assert await gate(request("second", "{}")) == GateDecision(True, "approved")


async def test_an_endless_line_is_no_yes(pipe: tuple[int, int]) -> None:
    r, w = pipe
    gate = TerminalApproval(Screen(io.StringIO()), TerminalAnswers(r))
    os.write(w, b"y" * (MAX_ANSWER_BYTES * 3) + b"\ny\n")
    assert (await gate(request("a", "{}"))).allowed is False  # the over-long line
    assert (await gate(request("b", "{}"))).allowed is True  # the line after it


async def test_a_terminal_drops_what_was_typed_before_the_question() -> None:
    controller, terminal = os.openpty()
    try:
        gate = TerminalApproval(Screen(io.StringIO()), TerminalAnswers(terminal))
        os.write(controller, b"y\n")  # typed ahead, before any question
        await trio.lowlevel.wait_readable(terminal)  # the line is in the terminal's queue
        async with trio.open_nursery() as nursery:
            decisions: list[GateDecision] = []

            async def ask() -> None:
                decisions.append(await gate(request("write_file", "{}")))

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            assert decisions == []  # the early "y" was not taken as the answer
            os.write(controller, b"n\n")
        assert decisions == [GateDecision(False, "the approver refused tool 'write_file'")]
    finally:
        os.close(controller)
        os.close(terminal)


async def test_no_input_at_all_denies() -> None:
    gate = TerminalApproval(Screen(io.StringIO()), TerminalAnswers(-1))
    assert await gate(request("a", "{}")) == GateDecision(
        False, "no approval for tool 'a': the terminal's input is closed"
    )


async def test_ctrl_d_on_a_terminal_refuses_one_question_only() -> None:
    controller, terminal = os.openpty()
    try:
        gate = TerminalApproval(Screen(io.StringIO()), TerminalAnswers(terminal))
        decisions: list[GateDecision] = []

        async def ask(tool: str) -> None:
            decisions.append(await gate(request(tool, "{}")))

        for tool, typed in (("first", b"\x04"), ("second", b"y\n")):  # Ctrl-D, then y
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, tool)
                await trio.testing.wait_all_tasks_blocked()
                os.write(controller, typed)
        assert decisions == [
            GateDecision(False, "the approver refused tool 'first'"),
            GateDecision(True, "approved"),
        ]
    finally:
        os.close(controller)
        os.close(terminal)


async def test_input_without_line_ends_ends_the_answers() -> None:
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        gate = TerminalApproval(Screen(io.StringIO()), TerminalAnswers(fd))
        assert (await gate(request("a", "{}"))).allowed is False  # 4 096 NULs: no "y"
        assert await gate(request("b", "{}")) == GateDecision(
            False, "no approval for tool 'b': the terminal's input is closed"
        )
    finally:
        os.close(fd)
