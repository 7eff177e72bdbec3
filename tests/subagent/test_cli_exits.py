"""Every exit of every ``subagent`` command is one line on standard error and a
documented code (issue 33 item 5): typed errors, groups of them from trio's
nurseries, an interrupt inside a group, and an unexpected exception."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import trio

from subagent import SubagentError
from subagent._cli._cli import main
from subagent._cli._exit import ending


@pytest.mark.parametrize("argv", [
    ["run", "nope.toml", "--agent", "a", "x"],
    ["mcp", "nope.toml"],
    ["resume", "nope.json", "nope.toml"],
    ["pending", "nope.json"],
    ["approve", "nope.json", "c1"],
    ["deny", "nope.json", "c1"],
    ["recover", "nope.toml", "nope.db"],
    ["temporal", "dev", "nope.toml"],
    ["temporal", "run", "nope.toml", "--agent", "a", "x"],
])
def test_every_command_exits_2_with_one_line_on_a_missing_file(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if argv[0] == "temporal":
        pytest.importorskip("temporalio")
    monkeypatch.chdir(tmp_path)
    assert main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("subagent: ")
    assert "No such file or directory" in err


@pytest.mark.parametrize(("argv", "line"), [
    (["recover", "ckpt.db"],
     "subagent: the following arguments are required: specs (see subagent recover --help)"),
    (["run", "specs.toml", "x"],
     "subagent: the following arguments are required: --agent (see subagent run --help)"),
    (["serve", "specs.toml", "--port", "x"],
     "subagent: argument --port: a port is 0 to 65535, not 'x' (see subagent serve --help)"),
    (["nope"], "subagent: argument command: invalid choice: 'nope' (choose from 'run', "
     "'demo', 'mcp', 'recover', 'resume', 'pending', 'approve', 'deny', 'temporal', "
     "'serve') (see subagent --help)"),
])
def test_a_wrong_command_line_is_one_line_and_2(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str],
) -> None:
    # argparse printed its usage (three lines and more) before the error.
    with pytest.raises(SystemExit) as info:
        main(argv, out=io.StringIO())
    assert (info.value.code, capsys.readouterr().err) == (2, line + "\n")


async def test_an_interrupt_inside_a_group_is_the_interrupt() -> None:
    # What trio's strict groups bring to main: the interrupt beside what it cancelled.
    cancelled: list[BaseException] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            cancelled.append(exc)
            raise
    group = BaseExceptionGroup("", [*cancelled, KeyboardInterrupt()])
    assert ending(group, False) == (130, "interrupted")
    assert ending(group, True) == (143, "terminated")
    assert ending(BaseExceptionGroup("", [ExceptionGroup("", [ValueError("x")]),
                                          KeyboardInterrupt()]), False) == (130, "interrupted")


def test_a_group_of_typed_errors_is_its_first_and_how_many_more() -> None:
    group = ExceptionGroup("", [SubagentError("tool 'read_file' twice"),
                                ExceptionGroup("", [SubagentError("b\nc")])])
    assert ending(group, False) == (2, "tool 'read_file' twice (and 1 more)")
    assert ending(SubagentError("a\nb"), False) == (2, "a\\nb")


def test_an_unexpected_exception_is_one_line_and_exit_1() -> None:
    assert ending(ExceptionGroup("", [RuntimeError("bad\nthing")]), False) == (
        1, "unexpected error: RuntimeError: bad\\nthing")
    assert ending(SystemExit(2), False) is None
