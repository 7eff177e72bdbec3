"""The tree view takes the pool's own events (path ``()``) without a node for them."""

from __future__ import annotations

from subagent import Event, EventKind
from subagent._view import TreeView, render_lines


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
