"""The tree view takes the pool's own events (path ``()``) without a node for them."""

from __future__ import annotations

import agentcore
from agentcore import GateDecision, ToolCall
from subagent import Event, EventKind
from subagent._cli._view import TreeView, render_lines


def test_a_pool_event_is_described_and_makes_no_node() -> None:
    view = TreeView()
    started = view.update(Event(("a/0001",), EventKind.task_started))
    said = view.update(Event((), EventKind.mcp_server_error, error="server 'time': exited\x1b[2J"))
    assert started == "started"
    assert said == "mcp_server_error: server 'time': exited\\x1b[2J"
    assert list(view.nodes) == [("a/0001",)]
    assert len(render_lines(view)) == 1


def test_a_pool_event_without_an_error_says_nothing() -> None:
    view = TreeView()
    assert view.update(Event((), EventKind.mcp_server_error)) is None
    assert render_lines(view) == []


def test_a_deferral_is_shown_as_waiting_for_approval_not_denied() -> None:
    # Before: "denied write_file: ... approve it later" (issue 32 item 4).
    view = TreeView()
    call = ToolCall("c1", "write_file", "{}")
    for decision in (GateDecision.defer("approve it later"), GateDecision(False, "no")):
        inner = agentcore.Event(agentcore.EventKind.gate_decision, "a/0001", "a", 1,
                                call=call, decision=decision)
        said = view.update(Event(("a/0001",), inner.kind, inner))
        if decision.deferred:
            assert said == "deferred write_file, waiting for approval: approve it later"
            assert view.nodes[("a/0001",)].activity == "waits for approval: write_file"
        else:
            assert said == "denied write_file: no"


def test_the_help_lists_every_exit_code() -> None:
    # Before: "4 paused" was missing (issue 32 item 4).
    from subagent._cli._cli import build_parser

    assert build_parser().epilog == (
        "exit codes: 0 answered, 1 task failed, 2 bad usage or specs, 3 ledger did not "
        "verify, 4 paused (calls wait for approval), 130 interrupted")
