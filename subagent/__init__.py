"""subagent: run LLM subagents on trio — a bounded pool, AgentPath-tagged events, delegation."""

from ledger._deprecated import moved as _moved

from . import limits as limits
from ._core._core import TaskStatus as TaskStatus
from ._core._statistics import PoolStatistics as PoolStatistics
from ._cost._budget import Budget as Budget
from ._cost._budget import BudgetReport as BudgetReport
from ._cost._budget import Spend as Spend
from ._delegation._results import SubagentResultsTool as SubagentResultsTool
from ._delegation._tool import SubagentTool as SubagentTool
from ._durable._claims import AlreadyResumedError as AlreadyResumedError
from ._durable._recovery import PausedTree as PausedTree
from ._durable._recovery import Recovered as Recovered
from ._durable._store import CheckpointError as CheckpointError
from ._durable._store import CheckpointRow as CheckpointRow
from ._durable._store import SqliteCheckpoints as SqliteCheckpoints
from ._durable._store import UnreadRow as UnreadRow
from ._errors import BudgetExceeded as BudgetExceeded
from ._errors import InvalidArgumentsError as InvalidArgumentsError
from ._errors import InvalidHistoryError as InvalidHistoryError
from ._errors import MaxChildrenError as MaxChildrenError
from ._errors import MaxDepthError as MaxDepthError
from ._errors import PoolClosedError as PoolClosedError
from ._errors import SpecError as SpecError
from ._errors import SubagentError as SubagentError
from ._errors import TaskCancelled as TaskCancelled
from ._errors import TaskError as TaskError
from ._errors import TaskFailed as TaskFailed
from ._errors import TaskPaused as TaskPaused
from ._errors import TaskTimeout as TaskTimeout
from ._errors import UnknownAgentError as UnknownAgentError
from ._events import Event as Event
from ._events import EventKind as EventKind
from ._events import LoopStall as LoopStall
from ._pool._open import open_pool as open_pool
from ._pool._pool import Pool as Pool
from ._pool._task import Task as Task
from ._result import Result as Result
from ._specs._file import SpecFile as SpecFile
from ._specs._file import SpecFileError as SpecFileError
from ._specs._file import load_specs as load_specs
from ._specs._file import specs_from_mapping as specs_from_mapping
from ._specs._outputschema import JsonSchemaOutput as JsonSchemaOutput
from ._specs._spec import Defaults as Defaults
from ._specs._spec import Spec as Spec
from ._stream import Stream as Stream
from ._stream import StreamStatistics as StreamStatistics

# Old top-level names, kept for one release: each warns and names its new place.
_MOVED = {
    "MAX_CHECKPOINT_BYTES": ("subagent.limits", "MAX_CHECKPOINT_BYTES"),
    "MAX_CHECKPOINT_ROWS": ("subagent.limits", "MAX_CHECKPOINT_ROWS"),
    "MAX_RESUME_CLAIMS": ("subagent.limits", "MAX_RESUME_CLAIMS"),
    "MAX_HISTORY_BYTES": ("subagent.limits", "MAX_HISTORY_BYTES"),
    "MAX_HISTORY_MESSAGES": ("subagent.limits", "MAX_HISTORY_MESSAGES"),
}


def __getattr__(name: str) -> object:
    return _moved("subagent", name, _MOVED)
