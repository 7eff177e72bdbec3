"""The tool gate: a decision per tool call, before it runs, and the stock gates."""

from __future__ import annotations

import math
import types
from collections.abc import Awaitable, Callable, Iterable

import attrs
import trio

from .._errors import describe
from .._messages import AgentPath, ToolCall
from ._tools import Tool, is_read_only


@attrs.frozen(slots=True)
class GateRequest:
    """What a gate is asked about: which run (by AgentPath) wants to call which tool, how."""

    path: AgentPath
    tool: Tool
    call: ToolCall


@attrs.frozen(slots=True)
class GateDecision:
    """A gate's answer: ``allowed``, and the ``reason`` (shown to the model on a denial).

    A *deferred* decision (:meth:`defer`) asks a human to answer later: the run
    pauses at its next safe point and ends ``paused`` with a ``RunState`` whose
    ``pending_approvals`` list the call (see :meth:`agentcore.Agent.resume`). It is
    not allowed: code that does not know about deferral treats it as a denial.
    """

    allowed: bool
    reason: str = ""
    deferred: bool = attrs.field(default=False, kw_only=True)

    @classmethod
    def defer(cls, reason: str = "") -> GateDecision:
        """A decision that leaves the call to a human, later: the run pauses."""
        return cls(False, reason, deferred=True)


#: A tool gate: any async callable from a request to a decision.
ToolGate = Callable[[GateRequest], Awaitable[GateDecision]]

ALLOW = GateDecision(True, "allowed")


async def allow_all(request: GateRequest) -> GateDecision:
    """A gate that allows every call. A checkpoint."""
    await trio.lowlevel.checkpoint()
    return ALLOW


async def deny_all(request: GateRequest) -> GateDecision:
    """A gate that denies every call. A checkpoint."""
    await trio.lowlevel.checkpoint()
    return GateDecision(False, f"tool {request.tool.name!r} is not allowed: every tool is denied")


async def read_only(request: GateRequest) -> GateDecision:
    """A gate that allows tools declaring ``read_only = True`` and denies the rest.

    A checkpoint.
    """
    await trio.lowlevel.checkpoint()
    if is_read_only(request.tool):
        return GateDecision(True, "read-only tool")
    return GateDecision(
        False, f"tool {request.tool.name!r} may change things and only read-only tools are allowed"
    )


#: An approver: asked about one call, answers True to allow.
Approver = Callable[[GateRequest], Awaitable[bool]]


@attrs.define(eq=False)
class ApprovalGate:
    """A gate that asks an async approver and denies (or defers) if it does not answer in time.

    Args:
      approver: Awaited with the request; returns True to allow.
      timeout: Seconds to wait for the approver (default 60); no answer by then denies.
      defer_after: If set, seconds after which an unanswered question is deferred
        instead (:meth:`GateDecision.defer`): the run pauses and the call waits in
        its ``RunState`` for a human's ``approve`` or ``deny``. It takes the place
        of ``timeout``.

    Calling the gate is a checkpoint.
    """

    approver: Approver
    timeout: float = 60.0
    defer_after: float | None = attrs.field(default=None, kw_only=True)

    async def __call__(self, request: GateRequest) -> GateDecision:
        wait = self.timeout if self.defer_after is None else self.defer_after
        with trio.move_on_after(wait):
            if await self.approver(request):
                return GateDecision(True, "approved")
            return GateDecision(False, f"the approver refused tool {request.tool.name!r}")
        if self.defer_after is not None:
            return GateDecision.defer(
                f"no answer for tool {request.tool.name!r} within {wait:g}s: left for approval"
            )
        return GateDecision(
            False, f"no approval for tool {request.tool.name!r} within {self.timeout:g}s"
        )


def _whose(owner: str) -> str:
    return f"the gate of {owner}" if owner else "the gate"


async def ask(gate: ToolGate, request: GateRequest, owner: str = "") -> GateDecision:
    """``gate``'s decision on ``request``, failing closed. A checkpoint.

    A gate that raises, or answers with anything but a :class:`GateDecision`
    whose ``allowed`` is a bool, denies; the reason names it (``owner``: whose
    gate it is, ``""`` for the calling run's own). Cancellation propagates: the
    caller bounds the wait.
    """
    try:
        decision = await gate(request)
    except Exception as exc:
        return GateDecision(False, f"{_whose(owner)} failed: {describe(exc)}")
    if not isinstance(decision, GateDecision):
        return GateDecision(
            False, f"{_whose(owner)} answered {type(decision).__name__}, not a GateDecision"
        )
    if not isinstance(decision.allowed, bool):
        # GateDecision("no") would allow: "no" is true.
        return GateDecision(
            False,
            f"{_whose(owner)} answered a GateDecision whose allowed is "
            f"{type(decision.allowed).__name__}, not bool",
        )
    if decision.deferred is not False and (decision.deferred is not True or decision.allowed):
        return GateDecision(
            False, f"{_whose(owner)} answered a GateDecision that is deferred but allowed, "
            "or whose deferred is not bool",
        )
    if owner and not decision.allowed:
        return attrs.evolve(decision, reason=f"{_whose(owner)}: {decision.reason}")
    return decision


def _pairs(value: Iterable[tuple[str, ToolGate]]) -> tuple[tuple[str, ToolGate], ...]:
    return tuple(value)


@attrs.frozen(eq=False)
class AllOf:
    """A gate that allows a call only when every gate in it allows it.

    It is the effective gate of a delegated run (see :func:`nested_gate`): the
    run's own gate and the effective gate of every run above it.

    Args:
      gates: ``(owner, gate)`` pairs, asked in order; the first denial decides and
        the gates after it are not asked. ``owner`` says whose gate it is in the
        reason of a denial (``the gate of <owner>: <reason>``); ``""`` marks the
        run's own gate, whose reasons pass unchanged.

    A member that raises or answers wrongly denies (see :func:`ask`), and so does
    one that has not decided when the time is up; the reason names it. When every
    member allows, the decision is the last one's. Calling it is a checkpoint.
    """

    gates: tuple[tuple[str, ToolGate], ...] = attrs.field(converter=_pairs)

    async def __call__(self, request: GateRequest) -> GateDecision:
        """Decide ``request`` with no bound of its own (the caller bounds it)."""
        return await self.decide(request, math.inf)

    async def decide(self, request: GateRequest, deadline: float) -> GateDecision:
        """Ask every member in turn, all by ``deadline`` (on trio's clock). A checkpoint."""
        decision = ALLOW
        owner = ""
        start = trio.current_time()
        with trio.move_on_at(deadline):
            if not self.gates:
                await trio.lowlevel.checkpoint()
            for owner, gate in self.gates:
                decision = await ask(gate, request, owner)
                if not decision.allowed:
                    return decision
            return decision
        waited = deadline - start
        return GateDecision(False, f"{_whose(owner)} did not decide within {waited:g}s")


def _same(gate: ToolGate, other: ToolGate | None) -> bool:
    # ``obj.method`` makes a new bound method at each access: two specs given
    # ``gate=policy.check`` hold two objects that are one gate.
    if gate is other:
        return True
    if isinstance(gate, types.MethodType) and isinstance(other, types.MethodType):
        return gate.__self__ is other.__self__ and gate.__func__ is other.__func__
    return False


def nested_gate(outer: ToolGate | None, owner: str, inner: ToolGate | None) -> ToolGate | None:
    """The effective gate of a run started from within another run. Not a checkpoint.

    Delegation cannot widen permission: the new run executes a call only if its own
    gate and the starting run's effective gate both allow it.

    Args:
      outer: The effective gate of the run that starts it (``None``: allows all).
      owner: That run's name in denial reasons (its AgentPath as text).
      inner: The new run's own gate (``None``: allows all).

    Returns:
      ``inner`` when there is no ``outer``; else an :class:`AllOf` of ``outer``'s
      gates (its own one now named by ``owner``), then ``inner``. A gate that is
      already one of ``outer``'s and also ``inner`` is asked once, as the new run's
      own (one approval gate shared by a whole tree asks once per call, and its
      denial is not blamed on an ancestor).
    """
    if outer is None:
        return inner
    above = outer.gates if isinstance(outer, AllOf) else (("", outer),)
    members = [(name or owner, gate) for name, gate in above if not _same(gate, inner)]
    if inner is not None:
        members.append(("", inner))
    if members == [("", inner)]:
        return inner
    return AllOf(members)
