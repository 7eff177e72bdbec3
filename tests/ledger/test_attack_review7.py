"""Review 7 (attacker): values of an unusual class in a record, through every sink.

A subclass of str, int or float passes every ``isinstance`` check, but its methods
are the caller's: a ``lower()`` or ``__len__`` of its own hid a secret from the
redactor, an ``__lt__`` reordered data keys (a JSON Lines ledger that failed its own
verification), a ``bit_length`` hid an int too wide to spell (a MemorySink read that
raised and dropped every pending entry), and a str subclass in ``data`` was not
redacted at all. Each sink now sees the value such an object holds, of the exact type.
"""

from __future__ import annotations

import enum
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger._memory
from ledger import JsonlSink, MemorySink, Record, SqliteSink, redact, redact_record, verify
from ledger._offload import OFFLOAD_CHARS, is_large
from tests.ledger._helpers import TIME, fixed_clock

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3
_TEXTS = ("tool", "call_id", "arguments", "result", "error", "reason")


class Plain(str):
    """A str subclass that changes nothing (as ``markupsafe.Markup`` or ``StrEnum``)."""


class Blind(str):
    """A str subclass whose methods hide what it holds from a redactor that asks them."""

    def lower(self) -> str:
        return ""

    def __len__(self) -> int:
        return 0

    def __contains__(self, other: object) -> bool:
        return False


class Backwards(str):
    """A str subclass that sorts backwards (data keys)."""

    def __lt__(self, other: object) -> bool:
        return str.__gt__(self, other)  # type: ignore[operator]

    def __gt__(self, other: object) -> bool:
        return str.__lt__(self, other)  # type: ignore[operator]

    __hash__ = str.__hash__


class Narrow(int):
    """An int subclass that says it is one bit wide."""

    def bit_length(self) -> int:
        return 1


class Wide(int):
    """An int subclass that changes nothing."""


class Count(enum.IntEnum):
    three = 3


class Half(float):
    def __repr__(self) -> str:
        return "half"


_STR_CLASSES: tuple[type[str], ...] = (Plain, Blind, Backwards)


def _fields(record: Record, data: dict[str, Any] | None = None) -> tuple[Any, ...]:
    r = record
    return (r.kind, r.run_id, r.path, r.agent_id, r.tool, r.call_id, r.arguments, r.verdict,
            r.reason, r.result, r.error, r.duration, data)


async def _every_sink(
    folder: Path, record: Record, data: dict[str, Any] | None = None,
    clock: Callable[[], str] = fixed_clock,
) -> list[list[Any]]:
    """The entries each sink (MemorySink's three ways in, JSON Lines, SQLite) makes of
    ``record`` then a plain one, with a fixed clock; the files verified."""
    out = []
    for way in ("record", "record_nowait", "record_fields_nowait"):
        memory = MemorySink(clock=clock)
        if way == "record":
            await memory.record(record)
        else:
            try:
                if way == "record_nowait":
                    memory.record_nowait(record)
                else:
                    memory.record_fields_nowait(*_fields(record, data))
            except trio.WouldBlock:
                await memory.record(record)
        memory.record_nowait(Record("run_end"))
        out.append(memory.entries)
    for name, make in (("a.jsonl", JsonlSink), ("a.db", SqliteSink)):
        path = folder / name
        path.unlink(missing_ok=True)
        sink = make(path, clock=clock)
        entries = [await sink.record(record), await sink.record(Record("run_end"))]
        await sink.aclose()
        report = verify(path)
        assert report.ok, report.message
        assert report.head == entries[-1].hash
        out.append(entries)
    return out


def _run(check: Callable[[Path], Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        trio.run(check, Path(folder))


_cases = settings(max_examples=40, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
_around = st.text(alphabet="ab =:\n", max_size=6)


@_cases
@given(cls=st.sampled_from(_STR_CLASSES), before=_around, after=_around,
       key=st.sampled_from(["note", "api_token", "password", "x"]))
@pytest.mark.slow
def test_a_str_subclass_in_data_is_redacted_by_every_sink(
    cls: type[str], before: str, after: str, key: str
) -> None:
    text = before + " " + SECRET + " " + after
    expected = redact_record(Record("k", data={key: text})).data[key]
    assert SECRET not in str(expected)

    async def main(folder: Path) -> None:
        data: dict[str, Any] = {cls(key): cls(text), cls("n"): 1}
        results = await _every_sink(folder, Record("k", data=data), data)
        for entries in results:
            got = entries[0].data
            assert dict(got) == {key: expected, "n": 1}
            assert {type(name) for name in got} == {str}
            assert type(got[key]) is str
        assert len({entries[0].hash for entries in results}) == 1

    _run(main)


@_cases
@given(cls=st.sampled_from(_STR_CLASSES), field=st.sampled_from(_TEXTS), before=_around)
def test_a_str_subclass_text_field_cannot_hide_a_secret(
    cls: type[str], field: str, before: str
) -> None:
    text = before + " " + SECRET
    plain: dict[str, Any] = {field: text}
    expected = getattr(redact_record(Record("k", **plain)), field)
    assert SECRET not in expected

    async def main(folder: Path) -> None:
        odd: dict[str, Any] = {field: cls(text)}
        record = Record("k", **odd)
        results = await _every_sink(folder, record)
        for entries in results:
            value = getattr(entries[0], field)
            assert (value, type(value)) == (expected, str)
        assert len({entries[0].hash for entries in results}) == 1

    _run(main)


def test_a_large_str_subclass_is_redacted_off_the_event_loop() -> None:
    # Blind says its length is 0: the size that decides is the text it holds.
    record = Record("tool_result", result=Blind("x" * (OFFLOAD_CHARS + 1)))
    assert is_large(record)
    sink = MemorySink()
    with pytest.raises(trio.WouldBlock):
        sink.record_nowait(record)
    with pytest.raises(trio.WouldBlock):
        sink.record_fields_nowait(*_fields(record))
    assert sink.statistics().recorded == 0


@pytest.mark.parametrize(
    "duration", [1 << 63, -(1 << 63) - 1, Narrow(1 << 70), 10**5000],
    ids=["2**63", "-2**63-1", "narrow", "10**5000"],
)
def test_a_duration_wider_than_64_bits_is_refused_by_every_sink(duration: int) -> None:
    # A SQLite ledger cannot store it: its writer failed the whole group commit (every
    # record of the batch, other tasks' too) with a SinkError.
    record = Record("k", duration=duration)
    bits = int.bit_length(duration)
    message = f"an entry's duration must be an int of at most 64 bits, not one of {bits} bits"

    async def main(folder: Path) -> None:
        memory = MemorySink()
        with pytest.raises(ValueError) as caught:
            memory.record_nowait(record)
        assert str(caught.value) == message
        for sink in (JsonlSink(folder / "a.jsonl"), SqliteSink(folder / "a.db")):
            with pytest.raises(ValueError) as caught:
                await sink.record(record)
            assert str(caught.value) == message
            await sink.record(Record("k", duration=(1 << 63) - 1))
            await sink.aclose()
            assert verify(sink.path).entries == 1

    _run(main)


@pytest.mark.parametrize("cls", [Narrow, Wide])
def test_an_int_too_wide_to_spell_is_refused_when_recorded_whatever_its_class(
    cls: type[int]
) -> None:
    # Narrow hid it from the check (bit_length); Wide passed it (an exact-type check):
    # a MemorySink read then raised, and dropped every entry not yet chained.
    record = Record("k", data={"n": cls(10**5000)})
    message = re.escape(
        "Exceeds the limit (4300 digits) for integer string conversion; use"
        " sys.set_int_max_str_digits() to increase the limit"
    ) + "$"

    async def main(folder: Path) -> None:
        memory = MemorySink(clock=fixed_clock)
        attempts: list[Callable[[], Any]] = [
            lambda: memory.record_nowait(record),
            lambda: memory.record_fields_nowait(*_fields(record, dict(record.data) or None)),
        ]
        for attempt in attempts:
            with pytest.raises(ValueError, match=message):
                attempt()
        with pytest.raises(ValueError, match=message):
            await memory.record(record)
        memory.record_nowait(Record("run_end"))
        assert [e.kind for e in memory.entries] == ["run_end"]
        for sink in (JsonlSink(folder / "a.jsonl"), SqliteSink(folder / "a.db")):
            with pytest.raises(ValueError, match=message):
                await sink.record(record)
            await sink.aclose()

    _run(main)


def test_a_bool_duration_is_refused_by_every_sink() -> None:
    # Encoded as true, which no reader takes back as a duration: the ledger would
    # not verify.
    record = Record("k", duration=True)
    message = "an entry's duration must be a float, an int or None, not bool"

    async def main(folder: Path) -> None:
        memory = MemorySink()
        with pytest.raises(TypeError) as caught:
            memory.record_nowait(record)
        assert str(caught.value) == message
        with pytest.raises(TypeError) as caught:
            memory.record_fields_nowait(*_fields(record))
        assert str(caught.value) == message
        assert memory.entries == []
        for sink in (JsonlSink(folder / "a.jsonl"), SqliteSink(folder / "a.db")):
            with pytest.raises(TypeError) as caught:
                await sink.record(record)
            assert str(caught.value) == message
            await sink.aclose()

    _run(main)


def test_data_keys_equal_only_by_their_own_eq_are_refused() -> None:
    class Unequal(str):
        def __eq__(self, other: object) -> bool:
            return self is other

        def __hash__(self) -> int:
            return id(self)

    with pytest.raises(ValueError) as caught:
        Record("k", data={Unequal("a"): 1, Unequal("a"): 2})
    assert str(caught.value) == "entry data holds two keys equal to 'a'"


def test_a_dict_changed_after_it_was_recorded_does_not_change_the_entry() -> None:
    # record_fields_nowait copies the data's items: what the caller does with its dict
    # afterwards (here: a value no entry takes) changes nothing, and reads do not fail.
    sink = MemorySink(clock=fixed_clock)
    data: dict[str, Any] = {"n": 1}
    sink.record_fields_nowait("k", "", (), "", None, None, None, None, None, None, None,
                              None, data)
    data["n"] = object()
    data["m"] = 2
    [entry] = sink.entries
    assert entry.data == {"n": 1}


def test_a_read_that_fails_loses_no_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    # Should chaining a pending record fail all the same (it cannot: recording checked
    # it), the read raises, and no entry, before or after it, is dropped.
    sink = MemorySink(clock=fixed_clock)
    sink.record_nowait(Record("prompt"))
    sink.record_fields_nowait("k", "", (), "", None, None, None, None, None, None, None,
                              None, {"n": 1})
    sink.record_nowait(Record("run_end", tool=Plain("x")))  # held: not plain
    real = redact_record

    def failing(record: Record) -> Record:
        if record.kind == "k":
            raise RuntimeError("chaining failed")
        return real(record)

    monkeypatch.setattr(ledger._memory, "redact_record", failing)
    with pytest.raises(RuntimeError, match=r"^chaining failed$"):
        sink.entries  # noqa: B018
    assert sink.statistics().recorded == 3
    sink.record_nowait(Record("later"))
    monkeypatch.setattr(ledger._memory, "redact_record", real)
    assert [(e.seq, e.kind, dict(e.data)) for e in sink.entries] == [
        (1, "prompt", {}), (2, "k", {"n": 1}), (3, "run_end", {}), (4, "later", {})
    ]
    assert sink.statistics().recorded == 4


_odd_scalars = st.one_of(
    st.integers(min_value=-(1 << 4095), max_value=1 << 4095).map(Narrow),
    st.just(Count.three),
    st.floats(allow_nan=False, allow_infinity=False).map(Half),
    st.sampled_from([0.0, -0.0, 1e308, -1e-308, 5e-324]),
    st.text(max_size=6).map(Backwards),
    st.booleans(),
    st.none(),
)


@_cases
@given(data=st.dictionaries(st.text(max_size=4).map(Backwards), _odd_scalars, max_size=4),
       duration=st.none() | st.just(Count.three)
       | st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1).map(Narrow),
       path=st.lists(st.text(min_size=1, max_size=4).map(Plain), max_size=3),
       kind=st.sampled_from(["prompt", Plain("tool_result"), Backwards("run_end")]))
@pytest.mark.slow
def test_odd_but_valid_records_chain_alike_in_every_sink(
    data: dict[str, Any], duration: Any, path: list[str], kind: str
) -> None:
    # Values of a subclass that the encoder takes: every sink chains the same entry
    # (same hash), and each file verifies.
    record = Record(kind, "r", path, "a", tool=Backwards("t"), duration=duration, data=data)

    async def main(folder: Path) -> None:
        results = await _every_sink(folder, record, data or None)
        assert len({entries[0].hash for entries in results}) == 1
        assert len({entries[1].hash for entries in results}) == 1
        assert results[0][0].time == TIME

    _run(main)


def test_redact_of_a_secret_is_what_a_subclass_gets() -> None:
    # The expected values above: redact_record of the plain text.
    assert redact_record(Record("k", arguments=Blind(SECRET))).arguments == redact(SECRET)


@pytest.mark.parametrize("bad", [None, b"2025-01-02", 12.5, 7], ids=repr)
def test_a_clock_that_returns_no_str_is_refused_when_recorded(bad: object) -> None:
    # A MemorySink took it and its read raised (or, for an int, read it as
    # nanoseconds: a time the file sinks never write); SQLite failed its whole group
    # commit with a SinkError.
    message = f"a sink's clock must return a str, not {type(bad).__name__}"

    def clock() -> Any:
        return bad

    async def main(folder: Path) -> None:
        memory = MemorySink(clock=clock)
        attempts: list[Callable[[], Any]] = [
            lambda: memory.record_nowait(Record("k")),
            lambda: memory.record_fields_nowait(*_fields(Record("k"))),
            lambda: memory.record_nowait(Record("k", data={"n": Narrow(1)})),
        ]
        for attempt in attempts:
            with pytest.raises(TypeError) as caught:
                attempt()
            assert str(caught.value) == message
        with pytest.raises(TypeError) as caught:
            await memory.record(Record("k", result="x" * (OFFLOAD_CHARS + 1)))
        assert str(caught.value) == message
        assert memory.entries == []
        for sink in (JsonlSink(folder / "a.jsonl", clock=clock),
                     SqliteSink(folder / "a.db", clock=clock)):
            with pytest.raises(TypeError) as caught:
                await sink.record(Record("k"))
            assert str(caught.value) == message
            await sink.aclose()

    _run(main)


def test_a_clock_of_a_str_subclass_gives_a_str_time() -> None:
    def clock() -> str:
        return Backwards(TIME)

    async def main(folder: Path) -> None:
        results = await _every_sink(folder, Record("k"), clock=clock)
        assert len({entries[0].hash for entries in results}) == 1
        assert {(entries[0].time, type(entries[0].time)) for entries in results} == {
            (TIME, str)
        }

    _run(main)


# A lone surrogate (a model's JSON may hold "\ud800") is valid in a str and in a JSON
# Lines ledger, but SQLite's driver cannot encode it: the writer failed the group
# commit of every record sharing it, so one task's hostile reply failed the entries
# of the others.
_WHERE = ("result", "arguments", "tool", "run_id", "agent_id", "path", "data key",
          "data value")


def _with_text(where: str, text: str) -> Record:
    if where == "path":
        return Record("k", path=("w", text))
    if where == "data key":
        return Record("k", data={text: 1})
    if where == "data value":
        return Record("k", data={"note": text})
    fields: dict[str, Any] = {where: text}
    return Record("k", **fields)


@_cases
@given(where=st.sampled_from(_WHERE), lone=st.integers(0xD800, 0xDFFF), before=_around,
       cls=st.sampled_from((str, Plain)))
def test_a_lone_surrogate_is_refused_alone_by_a_sqlite_sink(
    where: str, lone: int, before: str, cls: type[str]
) -> None:
    text = cls(before + chr(lone) + "x")
    record = _with_text(where, text)

    async def main(folder: Path) -> None:
        path = folder / "a.db"
        path.unlink(missing_ok=True)
        sink = SqliteSink(path, clock=fixed_clock)
        outcomes: dict[str, str] = {}

        async def attempt(name: str, record: Record) -> None:
            try:
                await sink.record(record)
                outcomes[name] = "ok"
            except Exception as exc:  # the outcome is what is checked
                outcomes[name] = type(exc).__name__

        async with trio.open_nursery() as nursery:
            nursery.start_soon(attempt, "hostile", record)
            nursery.start_soon(attempt, "innocent", Record("run_end"))
            nursery.start_soon(attempt, "another", Record("prompt", result="é"))
        await sink.aclose()
        assert outcomes == {"hostile": "UnicodeEncodeError", "innocent": "ok", "another": "ok"}
        report = verify(path)
        assert (report.ok, report.entries) == (True, 2)
        # A JSON Lines ledger keeps it, and verifies.
        jsonl = JsonlSink(folder / f"{lone}.jsonl", clock=fixed_clock)
        await jsonl.record(record)
        await jsonl.aclose()
        assert verify(folder / f"{lone}.jsonl").ok

    _run(main)


@pytest.mark.parametrize("cls", _STR_CLASSES)
def test_redact_sees_what_a_str_subclass_holds(cls: type[str]) -> None:
    # ledger.redact is what the OpenTelemetry export runs a tool's result through.
    text = "key: " + SECRET
    redacted = redact(cls(text))
    assert (redacted, type(redacted)) == (redact(text), str)
    assert SECRET not in redacted
