"""What the activity does for a running tree besides forwarding events: apply the
workflow's controls (interrupt, steer) to the root, and snapshot the status of every
task of the tree for the workflow's ``tasks`` query.

Controls come back from the server by query: they are checked like any outside input
(exact shape, the bounds of :mod:`._approvals`); anything else is skipped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import trio

import agentcore

from .._errors import format_path
from .._pool._task import Task
from ._approvals import CONTROL_KINDS, MAX_CONTROL_PAGE, MAX_STEER_CHARS, MAX_TASKS
from ._inputs import Control

#: Seconds between two polls of the workflow's controls.
CONTROL_POLL = 0.5
#: Seconds one poll may take.
CONTROL_TIMEOUT = 10.0


def tree_statuses(root: Task) -> dict[str, str]:
    """The status of ``root`` and every task under it (task path -> status value),
    depth first, at most :data:`MAX_TASKS`. Not a checkpoint."""
    found: dict[str, str] = {}
    stack = [root]
    while stack and len(found) < MAX_TASKS:
        task = stack.pop()
        found[format_path(task.path)] = task.status.value
        stack.extend(reversed(task.children))
    return found


def _valid(control: object, number: int) -> bool:
    return (isinstance(control, Control) and isinstance(control.number, int)
            and control.number >= number and control.kind in CONTROL_KINDS
            and isinstance(control.text, str) and len(control.text) <= MAX_STEER_CHARS)


def apply(root: Task, control: Control) -> None:
    """Apply one control to the root task. Not a checkpoint."""
    if control.kind == "interrupt":
        root.interrupt()
    else:
        with contextlib.suppress(agentcore.RunEndedError):  # ended meanwhile: nothing to steer
            root.steer(control.text)


async def poll_controls(
    fetch: Callable[[int], Awaitable[list[Control]]],
    root: Task,
    first: int,
    applied: list[int],
) -> None:
    """Forever: fetch the controls numbered ``first`` on and apply them to ``root`` in
    order; ``applied[0]`` is the number of the next one to apply. The first poll is
    after :data:`CONTROL_POLL` (a run shorter than that makes no query). A checkpoint."""
    applied[0] = first
    while True:
        await trio.sleep(CONTROL_POLL)
        controls: list[Control] = []
        with trio.move_on_after(CONTROL_TIMEOUT):
            try:
                controls = await fetch(applied[0])
            except Exception:  # the workflow is unreachable now: the next poll tries again
                controls = []
        if isinstance(controls, list):
            for control in controls[:MAX_CONTROL_PAGE]:
                if _valid(control, applied[0]):
                    apply(root, control)
                    applied[0] = control.number + 1
