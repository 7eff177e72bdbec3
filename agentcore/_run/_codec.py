"""``RunState`` as JSON: the versioned, digested text of ``to_json`` / ``from_json``.

The text is an envelope ``{"format", "version", "digest", "state"}``; ``digest`` is
``sha256:`` and the hex SHA-256 of the exact bytes of ``state`` as written, so an
edit by hand (or a torn copy) is refused instead of resumed. The digest detects
changes, not an attacker who rewrites it too: keep states where only the people
who may approve can write. Decoding is hostile-input safe: a size cap first, then
msgspec against fixed schemas with unknown fields refused; children states are
kept as raw text and decoded one level at a time under a depth bound, so nothing
recurses on the input's nesting.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated, Literal, Protocol

import attrs
import msgspec

from .._errors import RunStateError
from .._messages import AgentPath, Message, ToolCall, Usage
from .._spent import Spent, StoredSpent, spent_of, spent_to_store
from .._summary import EndReason, RunSummary
from ._pending import BackgroundChild, CallStatus, PendingCall
from ._statechecks import MAX_STATE_STEERING, check_mark, check_schema, steering_to_store

#: The format name in every encoded state.
FORMAT = "agentcore.RunState"
#: The newest version this agentcore writes and reads (versions 1 and 2 are read). A
#: state is written as 1 unless it has background children, schema digests, spend or
#: a nonce.
VERSION = 2
#: The version of states without them (read and written as before).
_VERSION_1 = 1
#: The most bytes of JSON text ``RunState.from_json`` reads by default: 64 MiB.
MAX_STATE_BYTES = 64 << 20
#: The deepest nesting of children states ``RunState.from_json`` accepts (the
#: root is level 1).
MAX_STATE_DEPTH = 32
#: An error quotes at most this much of the decoder's message.
_QUOTED = 300

_Count = Annotated[int, msgspec.Meta(ge=0)]
_Seconds = Annotated[float, msgspec.Meta(ge=0, le=1e12)]


class _Call(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    name: str
    arguments: str


class _Message(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[_Call] = []
    tool_call_id: str | None = None
    is_error: bool = False


class _Usage(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    input_tokens: _Count = 0
    output_tokens: _Count = 0
    cache_read_tokens: _Count = 0
    cache_write_tokens: _Count = 0
    model: str = ""
    cost: float | None = None


class _Summary(msgspec.Struct, forbid_unknown_fields=True):
    turns: _Count
    tool_calls: _Count
    tool_errors: _Count
    denied: _Count
    usage: _Usage
    end_reason: EndReason
    error: str | None
    duration: _Seconds


class _Pending(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    call: _Call
    status: CallStatus
    reason: str = ""
    by: str = ""
    result: str = ""
    is_error: bool = False
    denied: bool = False
    schema: str = ""


class _Background(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    call_id: str
    name: str
    result: str | None = None
    output: str | None = None
    error: str | None = None


class _Body(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    # Only ``steering``, ``background`` and ``spent`` have defaults: a state without
    # any is version 1's, byte for byte.
    run_id: str
    agent: str
    path: list[str]
    input: str
    messages: list[_Message]
    turn: _Count
    tool_calls: _Count
    tool_errors: _Count
    denied: _Count
    usage: _Usage
    follow_ups: list[str]
    reported: _Count
    summary: _Summary | None
    pending: list[_Pending]
    elapsed: _Seconds
    children: list[msgspec.Raw]
    steering: Annotated[list[str], msgspec.Meta(max_length=MAX_STATE_STEERING)] = []
    background: _Background | None = None
    spent: StoredSpent = {}
    nonce: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{32}$")] | None = None


class _Envelope(msgspec.Struct):
    format: str
    version: int
    digest: str
    state: msgspec.Raw


class _Head(msgspec.Struct):
    # What is read before the version is known: the rest may be anything.
    format: str
    version: int


class StateLike(Protocol):
    """What the encoder reads of a ``RunState`` (this module does not import it)."""

    @property
    def run_id(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def path(self) -> AgentPath: ...
    @property
    def input(self) -> str: ...
    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def turn(self) -> int: ...
    @property
    def tool_calls(self) -> int: ...
    @property
    def tool_errors(self) -> int: ...
    @property
    def denied(self) -> int: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def follow_ups(self) -> Sequence[str]: ...
    @property
    def reported(self) -> int: ...
    @property
    def summary(self) -> RunSummary | None: ...
    @property
    def pending(self) -> Sequence[PendingCall]: ...
    @property
    def elapsed(self) -> float: ...
    @property
    def children(self) -> Sequence[StateLike]: ...
    @property
    def steering(self) -> Sequence[str]: ...
    @property
    def background(self) -> BackgroundChild | None: ...
    @property
    def spent(self) -> dict[str, Spent]: ...
    @property
    def nonce(self) -> str: ...


@attrs.frozen
class Decoded:
    """One decoded state, as values: ``RunState.from_json`` makes the RunState."""

    run_id: str
    agent: str
    path: AgentPath
    input: str
    messages: list[Message]
    turn: int
    tool_calls: int
    tool_errors: int
    denied: int
    usage: Usage
    follow_ups: list[str]
    reported: int
    summary: RunSummary | None
    pending: list[PendingCall]
    elapsed: float
    background: BackgroundChild | None = None
    delegated: int = 0  # how many of ``pending`` are delegated (their children first)
    children: list[Decoded] = attrs.Factory(list)
    steering: list[str] = attrs.Factory(list)
    spent: dict[str, Spent] = attrs.Factory(dict)
    nonce: str = ""


_encoder = msgspec.json.Encoder()
_head = msgspec.json.Decoder(_Head)
_envelope = msgspec.json.Decoder(_Envelope)
_body = msgspec.json.Decoder(_Body)


def _call(c: ToolCall) -> _Call:
    return _Call(c.id, c.name, c.arguments)


def _usage(u: Usage) -> _Usage:
    return _Usage(u.input_tokens, u.output_tokens, u.cache_read_tokens,
                  u.cache_write_tokens, u.model, u.cost)


def _body_of(state: StateLike, children: list[msgspec.Raw]) -> _Body:
    s = state.summary
    return _Body(
        run_id=state.run_id,
        agent=state.agent,
        path=list(state.path),
        input=state.input,
        messages=[
            _Message(m.role, m.content, [_call(c) for c in m.tool_calls], m.tool_call_id,
                     m.is_error)
            for m in state.messages
        ],
        turn=state.turn,
        tool_calls=state.tool_calls,
        tool_errors=state.tool_errors,
        denied=state.denied,
        usage=_usage(state.usage),
        follow_ups=list(state.follow_ups),
        reported=state.reported,
        summary=None if s is None else _Summary(
            s.turns, s.tool_calls, s.tool_errors, s.denied, _usage(s.usage), s.end_reason,
            s.error, s.duration,
        ),
        pending=[
            _Pending(_call(p.call), p.status, p.reason, p.by, p.result, p.is_error, p.denied,
                     p.schema)
            for p in state.pending
        ],
        elapsed=state.elapsed,
        children=children,
        steering=steering_to_store(state.steering),
        background=None if state.background is None else _Background(
            state.background.call_id, state.background.name, state.background.result,
            state.background.output, state.background.error,
        ),
        spent=spent_to_store(state.spent),
        nonce=state.nonce or None,
    )


def encode_state(state: StateLike) -> str:
    """The JSON text of ``state`` (see the module docstring). Not a checkpoint."""
    # Children first, deepest last: an explicit stack instead of recursion.
    order: list[StateLike] = []
    stack = [state]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    version = _VERSION_1
    encoded: dict[int, bytes] = {}
    for node in reversed(order):
        if node.background is not None or node.spent or node.nonce or any(
                p.schema for p in node.pending):
            version = VERSION
        kids = [msgspec.Raw(encoded.pop(id(c))) for c in node.children]
        encoded[id(node)] = _encoder.encode(_body_of(node, kids))
    body = encoded[id(state)]
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return _encoder.encode(_Envelope(FORMAT, version, digest, msgspec.Raw(body))).decode()


def _too_deep() -> RunStateError:
    # msgspec recurses on nesting even where it only skips a value (it raises
    # RecursionError cleanly, at the interpreter's limit): refused like too many
    # levels of children.
    return RunStateError(
        f"RunState nested too deeply (more than {MAX_STATE_DEPTH} levels of children, "
        "or JSON nested past the decoder's limit)"
    )


def _refuse(what: str, exc: Exception | None = None) -> RunStateError:
    if exc is None:
        return RunStateError(f"not a RunState: {what}")
    text = str(exc)
    if len(text) > _QUOTED:
        text = text[:_QUOTED] + "..."
    return RunStateError(f"not a RunState: {what}: {text}")


def decode_state(text: str | bytes, max_bytes: int | None = None) -> Decoded:
    """The state that ``text`` encodes, as values; see ``RunState.from_json``."""
    cap = MAX_STATE_BYTES if max_bytes is None else max_bytes
    if isinstance(text, str):
        if len(text) > cap:
            raise RunStateError(f"RunState JSON too large (more than {cap} bytes)")
        data = text.encode("utf-8", "surrogatepass")
    elif isinstance(text, bytes | bytearray | memoryview):
        data = bytes(text)
    else:
        raise TypeError(f"RunState.from_json takes str or bytes, not {type(text).__name__}")
    if len(data) > cap:
        raise RunStateError(f"RunState JSON too large (more than {cap} bytes)")
    try:
        head = _head.decode(data)
    except RecursionError:
        raise _too_deep() from None
    except msgspec.DecodeError as exc:
        raise _refuse("the text is not a JSON object with a format and a version", exc) from None
    if head.format != FORMAT:
        raise RunStateError(f"not a RunState: its format is {head.format[:100]!r}, not {FORMAT!r}")
    if head.version not in (_VERSION_1, VERSION):
        raise RunStateError(
            f"RunState written by an incompatible version (format version {head.version}; "
            f"this agentcore reads versions {_VERSION_1} and {VERSION})"
        )
    try:
        envelope = _envelope.decode(data)
    except RecursionError:
        raise _too_deep() from None
    except msgspec.DecodeError as exc:
        raise _refuse("bad envelope", exc) from None
    body = bytes(envelope.state)
    if envelope.digest != "sha256:" + hashlib.sha256(body).hexdigest():
        raise RunStateError(
            "RunState does not match its digest: it was changed after it was written "
            "(edited by hand or damaged); refusing to resume it"
        )
    return _decode_tree(body, head.version)


def _decode_tree(body: bytes, version: int) -> Decoded:
    # Level by level: each body is decoded against a schema with no recursion, its
    # children kept raw until their level; the depth is counted, not recursed.
    root, kids = _state_of(body, version)
    if root.background is not None:
        raise _refuse("bad state: the top state is marked as a background child")
    _check_count(root, kids)
    totals = {id(root): len(kids)}
    level = [(root, kid) for kid in kids]
    depth = 1
    while level:
        depth += 1
        if depth > MAX_STATE_DEPTH:
            raise _too_deep()
        deeper: list[tuple[Decoded, msgspec.Raw]] = []
        for parent, raw in level:
            child, kids = _state_of(bytes(raw), version)
            _check_count(child, kids)
            _check_order(parent, child, totals[id(parent)])
            totals[id(child)] = len(kids)
            parent.children.append(child)
            deeper.extend((child, kid) for kid in kids)
        level = deeper
    return root


def _check_count(state: Decoded, kids: list[msgspec.Raw]) -> None:
    if state.delegated > len(kids):  # (more children: background ones, checked next)
        raise _refuse(
            f"bad state: {state.delegated} delegated calls but {len(kids)} children states"
        )


def _check_order(parent: Decoded, child: Decoded, total: int) -> None:
    # The first ``delegated`` children are the delegated calls' (no mark), the rest
    # background children (marked).
    k = len(parent.children)
    if k < parent.delegated and child.background is not None:
        raise _refuse(
            f"bad state: {parent.delegated} delegated calls but child {k} is a background "
            "child (the delegated calls' states come first)"
        )
    if k >= parent.delegated and child.background is None:
        raise _refuse(f"bad state: {parent.delegated} delegated calls but {total} children states")


def _check_version_1(b: _Body) -> None:
    if b.background is not None:
        raise ValueError(f"a version {_VERSION_1} state has no background children")
    if any(p.schema for p in b.pending):
        raise ValueError(f"a version {_VERSION_1} state has no schema digests")
    if b.spent or b.nonce is not None:
        raise ValueError(f"a version {_VERSION_1} state has no spend nor nonce")


def _state_of(body: bytes, version: int) -> tuple[Decoded, list[msgspec.Raw]]:
    try:
        b = _body.decode(body)
        if version == _VERSION_1:
            _check_version_1(b)
        return _build(b), b.children
    except RecursionError:
        raise _too_deep() from None
    except (msgspec.DecodeError, ValueError, TypeError) as exc:
        raise _refuse("bad state", exc) from None


def _tool_call(c: _Call) -> ToolCall:
    return ToolCall(c.id, c.name, c.arguments)


def _the_usage(u: _Usage) -> Usage:
    return Usage(u.input_tokens, u.output_tokens, cache_read_tokens=u.cache_read_tokens,
                 cache_write_tokens=u.cache_write_tokens, model=u.model, cost=u.cost)


def _build(b: _Body) -> Decoded:
    # Raises ValueError for values the attrs classes refuse (usage counts that do
    # not add up, a cost that is not finite).
    messages = [
        Message(m.role, m.content, [_tool_call(c) for c in m.tool_calls], m.tool_call_id,
                m.is_error)
        for m in b.messages
    ]
    if b.reported > len(b.follow_ups):
        raise ValueError("more follow-ups reported than there are")
    summary = None
    if b.summary is not None:
        s = b.summary
        summary = RunSummary(s.turns, s.tool_calls, s.tool_errors, s.denied,
                             _the_usage(s.usage), s.end_reason, s.error, s.duration)
    pending = [
        PendingCall(_tool_call(p.call), p.status, p.reason, p.by, p.result, p.is_error,
                    p.denied, check_schema(p.schema))
        for p in b.pending
    ]
    if pending and (summary is None or summary.end_reason is not EndReason.paused):
        raise ValueError("pending tool calls in a state that is not paused")
    delegated = sum(1 for p in pending if p.status is CallStatus.delegated)
    m = b.background
    background = None if m is None else BackgroundChild(
        m.call_id, m.name, m.result, m.output, m.error)
    if background is not None:
        check_mark(background, summary is not None and summary.end_reason is EndReason.paused)
    return Decoded(b.run_id, b.agent, tuple(b.path), b.input, messages, b.turn,
                   b.tool_calls, b.tool_errors, b.denied, _the_usage(b.usage),
                   list(b.follow_ups), b.reported, summary, pending, b.elapsed,
                   background, delegated, steering=list(b.steering),
                   spent=spent_of(b.spent), nonce=b.nonce or "")

