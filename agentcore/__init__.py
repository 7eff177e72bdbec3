"""agentcore: one agent run — messages, model and tool protocols, the turn loop, the gate."""

from ledger._deprecated import moved as _moved

from . import limits as limits
from . import lowlevel as lowlevel
from ._agent import Agent as Agent
from ._errors import AgentCoreError as AgentCoreError
from ._errors import AuditError as AuditError
from ._errors import CallPaused as CallPaused
from ._errors import ConfigurationError as ConfigurationError
from ._errors import ContextTooLongError as ContextTooLongError
from ._errors import ModelError as ModelError
from ._errors import OutputValidationError as OutputValidationError
from ._errors import ResumeError as ResumeError
from ._errors import RunStateError as RunStateError
from ._errors import TransientModelError as TransientModelError
from ._events import Event as Event
from ._events import EventKind as EventKind
from ._events import EventSink as EventSink
from ._history import MessageCounter as MessageCounter
from ._history import count_chars as count_chars
from ._history import estimate_tokens as estimate_tokens
from ._hooks import EventObserver as EventObserver
from ._hooks import ModelInterceptor as ModelInterceptor
from ._hooks import ToolInterceptor as ToolInterceptor
from ._hookset import HookAction as HookAction
from ._hookset import HookResult as HookResult
from ._messages import AgentPath as AgentPath
from ._messages import Message as Message
from ._messages import ModelRequest as ModelRequest
from ._messages import ModelResponse as ModelResponse
from ._messages import Role as Role
from ._messages import ToolCall as ToolCall
from ._messages import ToolSpec as ToolSpec
from ._messages import Usage as Usage
from ._models import ChatModel as ChatModel
from ._models import DeltaSink as DeltaSink
from ._models import StreamingChatModel as StreamingChatModel
from ._retry import RetryPolicy as RetryPolicy
from ._run._checkpoint import Checkpoint as Checkpoint
from ._run._checkpoint import Checkpointer as Checkpointer
from ._run._checkpoint import CheckpointKind as CheckpointKind
from ._run._output import FINAL_RESULT as FINAL_RESULT
from ._run._output import OutputSchema as OutputSchema
from ._run._output import TypedOutput as TypedOutput
from ._run._pending import BackgroundChild as BackgroundChild
from ._run._pending import CallStatus as CallStatus
from ._run._pending import PendingApproval as PendingApproval
from ._run._pending import PendingCall as PendingCall
from ._run._result import RunResult as RunResult
from ._run._run import Run as Run
from ._run._run import current_run as current_run
from ._run._state import RunState as RunState
from ._spent import Spent as Spent
from ._steering import InboxMessage as InboxMessage
from ._steering import RunEndedError as RunEndedError
from ._summary import EndReason as EndReason
from ._summary import RunSummary as RunSummary
from ._tools._arguments import ArgumentsError as ArgumentsError
from ._tools._arguments import load_arguments as load_arguments
from ._tools._gate import AllOf as AllOf
from ._tools._gate import ApprovalGate as ApprovalGate
from ._tools._gate import Approver as Approver
from ._tools._gate import GateDecision as GateDecision
from ._tools._gate import GateRequest as GateRequest
from ._tools._gate import ToolGate as ToolGate
from ._tools._gate import allow_all as allow_all
from ._tools._gate import deny_all as deny_all
from ._tools._gate import nested_gate as nested_gate
from ._tools._gate import read_only as read_only
from ._tools._tools import FunctionTool as FunctionTool
from ._tools._tools import Liveness as Liveness
from ._tools._tools import SelfMonitoring as SelfMonitoring
from ._tools._tools import Tool as Tool
from ._tools._tools import ToolOutcome as ToolOutcome
from ._tools._tools import check_liveness as check_liveness
from ._tools._tools import is_idempotent as is_idempotent
from ._tools._tools import is_read_only as is_read_only
from ._tools._tools import liveness_of as liveness_of
from ._tools._tools import tool_spec as tool_spec
from ._tools._typed import SelfMonitoringTypedTool as SelfMonitoringTypedTool
from ._tools._typed import ToolArgumentsError as ToolArgumentsError
from ._tools._typed import TypedTool as TypedTool
from ._tools._typed import tool as tool

# Old top-level names, kept for one release: each warns and names its new place.
_MOVED = {
    "INTERRUPTED": ("agentcore.lowlevel", "INTERRUPTED"),
    "recover_calls": ("agentcore.lowlevel", "recover_calls"),
    "start_checkpoint": ("agentcore.lowlevel", "start_checkpoint"),
    "current_tool_call": ("agentcore.lowlevel", "current_tool_call"),
    "CurrentToolCall": ("agentcore.lowlevel", "CurrentToolCall"),
    "resumed_call_state": ("agentcore.lowlevel", "resumed_call_state"),
    "MAX_ARGUMENT_BYTES": ("agentcore.limits", "MAX_ARGUMENT_BYTES"),
    "MAX_ARGUMENT_DEPTH": ("agentcore.limits", "MAX_ARGUMENT_DEPTH"),
    "MAX_STATE_BYTES": ("agentcore.limits", "MAX_STATE_BYTES"),
    "MAX_STATE_DEPTH": ("agentcore.limits", "MAX_STATE_DEPTH"),
    "MAX_STATE_STEERING": ("agentcore.limits", "MAX_STATE_STEERING"),
    "MAX_TOOL_THREADS": ("agentcore.limits", "MAX_TOOL_THREADS"),
    "Pending": ("agentcore", "InboxMessage"),
}


def __getattr__(name: str) -> object:
    return _moved("agentcore", name, _MOVED)
