"""subagent on Temporal: a root task as a workflow, its tree in an activity on a worker.

Needs the ``temporal`` extra (``pip install 'subagent[temporal]'``); ``import subagent``
never imports this package. The client side (:func:`start`, :func:`events`) is
asyncio, as ``temporalio`` is. See ``docs/temporal.md``.
"""

from __future__ import annotations

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "subagent.temporal needs the 'temporal' extra: pip install 'subagent[temporal]'"
    ) from exc

from ledger._deprecated import moved as _moved

from ._admission import AdmissionState as AdmissionState
from ._admission import AdmissionWorkflow as AdmissionWorkflow
from ._admission import admission_id as admission_id
from ._client import admission_state as admission_state
from ._client import ensure_admission as ensure_admission
from ._client import events as events
from ._client import start as start
from ._devserver import DevServer as DevServer
from ._devserver import temporal_binary as temporal_binary
from ._errors import BadAnswer as BadAnswer
from ._errors import DevServerError as DevServerError
from ._errors import EventDecodeError as EventDecodeError
from ._errors import EventsLost as EventsLost
from ._errors import NotPaused as NotPaused
from ._errors import StateTooLarge as StateTooLarge
from ._errors import TemporalError as TemporalError
from ._errors import UnknownCall as UnknownCall
from ._inputs import Answer as Answer
from ._inputs import ApprovalRequest as ApprovalRequest
from ._inputs import PendingAnswers as PendingAnswers
from ._inputs import RootInput as RootInput
from ._inputs import RootResult as RootResult
from ._inputs import RunOptions as RunOptions
from ._resume import Heartbeat as Heartbeat
from ._signals import approve as approve
from ._signals import controls_applied as controls_applied
from ._signals import deny as deny
from ._signals import interrupt as interrupt
from ._signals import pending as pending
from ._signals import steer as steer
from ._signals import tasks as tasks
from ._worker import Worker as Worker
from ._worker import ledger_name as ledger_name
from ._workflow import SubagentWorkflow as SubagentWorkflow

# Old top-level names, kept for one release: each warns and names its new place.
_MOVED = {
    "Pending": ("subagent.temporal", "PendingAnswers"),
    "PendingCall": ("subagent.temporal", "ApprovalRequest"),
}


def __getattr__(name: str) -> object:
    return _moved("subagent.temporal", name, _MOVED)
