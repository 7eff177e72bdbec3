"""Review 7 (attacker): an entry whose data no record takes is the same AuditError
whatever the sink. A MemorySink (``record_fields_nowait``) refused it as an
AuditError; every other sink got a raw TypeError or ValueError from building the
record, so a hostile model reply (a ``finish_reason`` that is not a str) ended a run
with a different error depending on where its audit went."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from agentcore import Agent, AuditError, EndReason, Message, ModelResponse, Usage
from agentcore._audit import record, record_fields_sync
from agentcore.testing import ScriptedModel
from ledger import JsonlSink, MemorySink, Sink, SqliteSink
from tests.agentcore.test_audit_nowait import NowaitFailingSink
from tests.agentcore.test_audit_sync import AwaitedOnly

_PATH = ("w/0001",)

_REFUSED = [
    ({"finish_reason": ["stop"]}, "TypeError: entry data value for 'finish_reason' must be"
                                  " str, int, float, bool or None, not list"),
    ({"n": float("nan")}, "ValueError: entry data value for 'n' must be finite, not nan"),
    ({1: "a"}, "TypeError: entry data keys must be str, not int"),
]


def _sinks(folder: Path) -> list[Sink]:
    return [MemorySink(), NowaitFailingSink(), AwaitedOnly(), JsonlSink(folder / "a.jsonl")]


@pytest.mark.parametrize("cancellable", [True, False])
@pytest.mark.parametrize(("data", "why"), _REFUSED)
async def test_data_no_record_takes_is_an_audit_error_whatever_the_sink(
    tmp_path: Path, cancellable: bool, data: dict[Any, Any], why: str
) -> None:
    for sink in _sinks(tmp_path):
        with pytest.raises(AuditError) as caught:
            record_fields_sync(sink, cancellable, "model_response", "r", _PATH, "a",
                               data=dict(data))
        assert str(caught.value) == f"the audit sink failed to record 'model_response': {why}"
        assert type(caught.value.__cause__) is (TypeError if why[0] == "T" else ValueError)
        await sink.aclose()


async def test_a_hostile_finish_reason_ends_a_run_alike_whatever_the_sink(
    tmp_path: Path,
) -> None:
    errors = set()
    for sink in _sinks(tmp_path):
        reply = ModelResponse(Message("assistant", "hi"), ["stop"], Usage())  # type: ignore[arg-type]
        result = await Agent(model=ScriptedModel([reply]), audit=sink).run("go")
        assert result.summary.end_reason is EndReason.error
        errors.add(result.summary.error)
        await sink.aclose()
    assert errors == {
        "AuditError: the audit sink failed to record 'model_response': " + _REFUSED[0][1]
    }


def test_no_checkpoint_is_added() -> None:
    # The refusal is raised synchronously, as before: nothing awaited.
    async def main() -> None:
        with trio.testing.assert_no_checkpoints(), pytest.raises(AuditError):
            bad: dict[str, Any] = {"x": [1]}
            record_fields_sync(AwaitedOnly(), True, "k", "r", _PATH, "a", data=bad)

    trio.run(main)


# A file sink's failure named its ledger's host path in the AuditError's text, which
# reaches the run's summary, its events and a parent's model.


class _OpenFails:
    """A sink whose recording fails with an OSError naming a file."""

    path = "/srv/secret-tenant/ledger.jsonl"

    def record_nowait(self, entry: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", self.path)

    async def record(self, entry: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", self.path)

    async def aclose(self) -> None:
        pass


async def test_a_file_sink_failure_names_no_host_path(tmp_path: Path) -> None:
    folder = tmp_path / "tenant-7"
    errors = []
    for sink in (JsonlSink(folder / "a.jsonl"), SqliteSink(folder / "a.db"), _OpenFails()):
        result = await Agent(model=ScriptedModel(["hi"]), audit=sink).run("go")
        assert result.summary.end_reason is EndReason.error
        errors.append(result.summary.error)
    assert errors == [
        "AuditError: the audit sink failed to record 'prompt': SinkError: cannot record to"
        " ledger a.jsonl: [Errno 2] No such file or directory",
        "AuditError: the audit sink failed to record 'prompt': SinkError: cannot record to"
        " ledger a.db: [Errno 2] No such file or directory",
        "AuditError: the audit sink failed to record 'prompt': FileNotFoundError: [Errno 2]"
        " No such file or directory",
    ]


async def test_a_closed_file_sink_names_no_host_path(tmp_path: Path) -> None:
    for sink, name in ((JsonlSink(tmp_path / "a.jsonl"), "JsonlSink (a.jsonl)"),
                       (SqliteSink(tmp_path / "a.db"), "SqliteSink (a.db)")):
        await sink.aclose()
        with pytest.raises(AuditError) as caught:
            for cancellable in (True, False):
                entry = record_fields_sync(sink, cancellable, "prompt", "r", _PATH, "a")
                assert entry is not None
                await record(sink, entry)
        assert str(caught.value) == (
            f"the audit sink failed to record 'prompt': SinkClosedError: record() on a"
            f" closed {name}"
        )
        assert str(tmp_path) not in str(caught.value)


class _NamedFails:
    """A sink whose failure's text names its path (a Path), or whose path fails."""

    def __init__(self, path: object) -> None:
        self._path = path

    @property
    def path(self) -> object:
        if isinstance(self._path, Exception):
            raise self._path
        return self._path

    def record_nowait(self, entry: object) -> None:
        raise RuntimeError("cannot write /srv/tenant-9/audit.log")

    async def record(self, entry: object) -> None:
        raise AssertionError("awaited")

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(("path", "text"), [
    (Path("/srv/tenant-9/audit.log"), "RuntimeError: cannot write audit.log"),
    (LookupError("no path"), "RuntimeError: cannot write /srv/tenant-9/audit.log"),
])
async def test_a_custom_sink_path_is_cut_or_left_alone(path: object, text: str) -> None:
    # A Path is cut to its last part as a str path is; a path property that fails
    # still gives the AuditError (not its own error).
    with pytest.raises(AuditError) as caught:
        record_fields_sync(_NamedFails(path), True, "prompt", "r", _PATH, "a")
    assert str(caught.value) == f"the audit sink failed to record 'prompt': {text}"
    assert type(caught.value.__cause__) is RuntimeError
