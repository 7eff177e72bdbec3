"""subagent: run LLM subagents on trio — a bounded pool, AgentPath-tagged events, delegation."""

from ._errors import InvalidArgumentsError as InvalidArgumentsError
from ._errors import MaxChildrenError as MaxChildrenError
from ._errors import MaxDepthError as MaxDepthError
from ._errors import PoolClosedError as PoolClosedError
from ._errors import SpecError as SpecError
from ._errors import SubagentError as SubagentError
from ._errors import TaskCancelled as TaskCancelled
from ._errors import TaskError as TaskError
from ._errors import TaskFailed as TaskFailed
from ._errors import TaskTimeout as TaskTimeout
from ._errors import UnknownAgentError as UnknownAgentError
from ._events import Event as Event
from ._events import EventKind as EventKind
from ._pool import Pool as Pool
from ._pool import open_pool as open_pool
from ._results import SubagentResultsTool as SubagentResultsTool
from ._spec import Defaults as Defaults
from ._spec import Spec as Spec
from ._statistics import PoolStatistics as PoolStatistics
from ._stream import Stream as Stream
from ._stream import StreamStatistics as StreamStatistics
from ._task import Result as Result
from ._task import Task as Task
from ._task import TaskStatus as TaskStatus
from ._tool import SubagentTool as SubagentTool
from ._watchdog import LoopStall as LoopStall
