"""A paused-run file taken by ``subagent resume`` is refused by every command, whatever
its name, and a ``FILE.resumed`` left by a version before claims (the state moved as
it was) is refused too (issue 32 item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcore import Message, RunState
from subagent._cli._statefile import StateFileError, read_state, take_for_resume


def _state() -> RunState:
    return RunState.begin([Message("user", "go")], run_id="w/0001", agent="w",
                          path=("w/0001",), input="go")


def test_a_taken_file_is_refused_under_any_name(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(_state().to_json())
    assert take_for_resume(path).run_id == "w/0001"
    renamed = tmp_path / "anything.json"
    (tmp_path / "run.json.resumed").rename(renamed)
    with pytest.raises(StateFileError) as info:
        read_state(renamed)
    assert str(info.value) == (
        f"the paused run {renamed} was resumed already: resuming or answering it again "
        "could run its approved calls twice")


def test_a_file_taken_before_claims_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "run.json.resumed"
    old.write_text(_state().to_json())  # what an older version left: the state itself
    with pytest.raises(StateFileError) as info:
        read_state(old)
    assert str(info.value) == (
        f"the paused run {old} was resumed already: resuming or answering it again could "
        "run its approved calls twice")


def test_a_deeply_nested_file_is_a_state_file_error(tmp_path: Path) -> None:
    # The claim check decoded the file first and let msgspec's RecursionError out:
    # ``subagent pending`` ended "unexpected error: RecursionError", exit 1.
    path = tmp_path / "run.json"
    path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(StateFileError) as info:
        read_state(path)
    assert str(info.value) == (
        f"cannot read the paused run {path}: RunState nested too deeply (more than 32 "
        "levels of children, or JSON nested past the decoder's limit)")


def test_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    # Through a link, the lock was taken beside the link and the claim replaced the
    # link: the file itself stayed resumable, and resumed again with another ledger,
    # its approved write ran a second time.
    state = tmp_path / "run.json"
    state.write_text(_state().to_json())
    link = tmp_path / "link.json"
    link.symlink_to(state.name)
    with pytest.raises(StateFileError) as info:
        take_for_resume(link)
    assert str(info.value) == (
        f"cannot read the paused run {link}: it is a symbolic link; name the file it "
        "points to")
    assert link.is_symlink() and not (tmp_path / "link.json.lock").exists()
    assert read_state(state).run_id == "w/0001"


def test_a_paused_run_is_never_stored_over_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # ``subagent run --approve-later st.json`` twice: the second run replaced the
    # first's paused state, answers given to it included, without a word.
    import json

    from subagent._cli._cli import main
    from subagent._cli._statefile import store_paused

    from .test_cli import write_specs
    from .test_cli_pause import WRITE

    specs = write_specs(tmp_path, [WRITE])
    paused = tmp_path / "st.json"
    common = ["--ledger", str(tmp_path / "l.jsonl"), "--workspace", str(tmp_path), "--plain"]
    assert main(["run", str(specs), "--agent", "helper", "first", "--approve-later",
                 str(paused), *common]) == 4
    assert main(["approve", str(paused), "c1", "--by", "alice"]) == 0
    kept = paused.read_bytes()
    capsys.readouterr()
    assert main(["run", str(specs), "--agent", "helper", "second", "--approve-later",
                 str(paused), *common]) == 2
    out = capsys.readouterr()
    assert out.err == (
        f"subagent: {paused} exists: it may hold another paused run (answer and resume it, "
        "or move it away); a new one is never stored over it\n")
    assert out.out == ""  # refused before anything ran
    assert paused.read_bytes() == kept
    assert "second" not in (tmp_path / "l.jsonl").read_text()
    # At the store itself too (the file appeared while the run ran).
    with pytest.raises(StateFileError) as info:
        store_paused(paused, _state())
    assert str(info.value).startswith(f"{paused} exists: it may hold another paused run")
    assert paused.read_bytes() == kept
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".paused-")] == []
    assert json.loads(kept)["format"] == "agentcore.RunState"


def test_a_paused_run_file_in_no_folder_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # The run ran (its model calls spent) and only then failed to store its state.
    from subagent._cli._cli import main

    from .test_cli import write_specs
    from .test_cli_pause import WRITE

    specs = write_specs(tmp_path, [WRITE])
    nowhere = tmp_path / "missing" / "st.json"
    assert main(["run", str(specs), "--agent", "helper", "w", "--approve-later",
                 str(nowhere), "--ledger", str(tmp_path / "l.jsonl"), "--plain"]) == 2
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", f"subagent: cannot store a paused run in {nowhere}: "
                                      "its folder does not exist\n")
