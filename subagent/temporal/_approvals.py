"""The workflow's books of a paused run: its deferred calls, the answers received,
the graceful controls (interrupt, steer) waiting for the activity; and their bounds.

Standard library only, so the workflow sandbox can load it. Everything here comes
from signals (any client of the cluster may send one): an answer that names no
pending call, or names several, is ignored; a control over the bounds is dropped.
The client helpers (:mod:`._signals`) check the same bounds first and raise.
"""

from __future__ import annotations

from collections import deque

from ._inputs import Answer, ApprovalRequest, Control, wire_size

#: The largest paused state (``RunState.to_json()``, UTF-8 bytes, with its pending-call
#: rows) an activity hands back to its workflow. Temporal refuses a payload over 2 MiB
#: by default; the activity's result also carries up to 512 KiB of events.
MAX_STATE_BYTES = 1024 * 1024
#: Characters of a pending call's arguments shown by the ``pending`` query (the state
#: keeps them whole).
MAX_SHOWN_ARGUMENTS = 2048
#: Characters of an answer's reason, and of its ``by``.
MAX_REASON_CHARS = 4096
MAX_BY_CHARS = 256
#: Characters of one steering text.
MAX_STEER_CHARS = 64 * 1024
#: Controls the workflow keeps for the activity (the oldest are dropped beyond that).
MAX_CONTROLS = 256
#: Controls one ``controls`` query returns.
MAX_CONTROL_PAGE = 32
#: Bytes of steering text one ``controls`` query returns, as sent (at least one
#: control): the answer must stay under gRPC's 4 MiB.
MAX_CONTROL_PAGE_BYTES = 1024 * 1024
#: Task statuses the ``tasks`` query returns (the first ones of the tree).
MAX_TASKS = 1000
#: The kinds of control.
CONTROL_KINDS = ("interrupt", "steer")


def answer_problem(answer: Answer) -> str | None:
    """Why ``answer`` is out of bounds, or ``None``. Not a checkpoint."""
    if len(answer.call_id) > MAX_REASON_CHARS:
        return "the call id is too long"
    if len(answer.reason) > MAX_REASON_CHARS:
        return f"the reason is longer than {MAX_REASON_CHARS} characters"
    if len(answer.by) > MAX_BY_CHARS:
        return f"'by' is longer than {MAX_BY_CHARS} characters"
    if answer.path is not None and (len(answer.path) > 64 or any(
            not isinstance(p, str) or len(p) > 256 for p in answer.path)):
        return "the path is not an AgentPath"
    return None


class Approvals:
    """The deferred calls of a paused run and the answers received for them."""

    def __init__(self, calls: list[ApprovalRequest], round: int) -> None:
        self.calls = calls
        self.round = round
        self.answers: dict[int, Answer] = {}

    def matching(self, call_id: str, path: list[str] | None) -> list[int]:
        """The indices of the calls ``call_id`` (at ``path``, if given) names."""
        return [i for i, call in enumerate(self.calls)
                if call.call_id == call_id and (path is None or list(path) == call.path)]

    def record(self, answer: Answer) -> bool:
        """Record ``answer`` (a later one replaces an earlier one for the same call);
        ``False`` when it is out of bounds or does not name exactly one pending call."""
        if answer_problem(answer) is not None:
            return False
        found = self.matching(answer.call_id, answer.path)
        if len(found) != 1:
            return False
        call = self.calls[found[0]]
        self.answers[found[0]] = Answer(call.call_id, answer.approved, answer.reason,
                                        answer.by, call.path)
        return True

    def complete(self) -> bool:
        """Every deferred call has an answer."""
        return len(self.answers) == len(self.calls)

    def deny_the_rest(self, reason: str) -> None:
        """Deny every call still without an answer (the approval timeout)."""
        for i, call in enumerate(self.calls):
            if i not in self.answers:
                self.answers[i] = Answer(call.call_id, False, reason, "timeout", call.path)

    def in_order(self) -> list[Answer]:
        """The answers, in the order of the calls."""
        return [self.answers[i] for i in sorted(self.answers)]


class Controls:
    """Interrupts and steering texts for the root, numbered in arrival order."""

    def __init__(self) -> None:
        self.kept: deque[Control] = deque()
        self.total = 0
        self.dropped = 0

    def add(self, kind: str, text: str = "") -> bool:
        """Keep a control; ``False`` (dropped) when it is out of bounds."""
        if kind not in CONTROL_KINDS or len(text) > MAX_STEER_CHARS:
            self.dropped += 1
            return False
        self.kept.append(Control(self.total, kind, text))
        self.total += 1
        if len(self.kept) > MAX_CONTROLS:
            self.kept.popleft()
        return True

    def since(self, number: int) -> list[Control]:
        """The kept controls numbered ``number`` or more (at most MAX_CONTROL_PAGE, and
        MAX_CONTROL_PAGE_BYTES of text as sent)."""
        page: list[Control] = []
        size = 0
        for control in self.kept:
            if control.number < number:
                continue
            size += wire_size(control.text)
            if page and (size > MAX_CONTROL_PAGE_BYTES or len(page) == MAX_CONTROL_PAGE):
                break
            page.append(control)
        return page
