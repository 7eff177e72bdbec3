"""The public names of each package, listed: the surface changes only on purpose
(issue 34). A name added or removed fails here until this list says so. The old
top-level names (renamed, or moved to ``lowlevel`` / ``limits`` / ``encoding``)
still import, each with a DeprecationWarning naming its new place.
"""

from __future__ import annotations
import __future__

import importlib
import types
import warnings

import pytest

PUBLIC: dict[str, list[str]] = {
    "agentcore": [
        "Agent", "AgentCoreError", "AgentPath", "AllOf", "ApprovalGate", "Approver",
        "ArgumentsError", "AuditError", "BackgroundChild", "CallPaused", "CallStatus",
        "ChatModel", "Checkpoint", "CheckpointKind", "Checkpointer", "ConfigurationError",
        "ContextTooLongError", "DeltaSink", "EndReason", "Event", "EventKind",
        "EventObserver", "EventSink", "FINAL_RESULT", "FunctionTool", "GateDecision",
        "GateRequest", "HookAction", "HookResult", "InboxMessage", "Liveness", "Message",
        "MessageCounter", "ModelError", "ModelInterceptor", "ModelRequest", "ModelResponse",
        "OutputSchema", "OutputValidationError", "PendingApproval", "PendingCall",
        "ResumeError", "RetryPolicy", "Role", "Run", "RunEndedError", "RunResult",
        "RunState", "RunStateError", "RunSummary", "SelfMonitoring",
        "SelfMonitoringTypedTool", "Spent", "StreamingChatModel", "Tool",
        "ToolArgumentsError", "ToolCall", "ToolGate", "ToolInterceptor", "ToolOutcome",
        "ToolSpec", "TransientModelError", "TypedOutput", "TypedTool", "Usage", "allow_all",
        "check_liveness", "count_chars", "current_run", "deny_all", "estimate_tokens",
        "is_idempotent", "is_read_only", "liveness_of", "load_arguments", "nested_gate",
        "read_only", "tool", "tool_spec",
    ],
    "agentcore.lowlevel": [
        "CurrentToolCall", "INTERRUPTED", "current_tool_call", "recover_calls",
        "resumed_call_state", "start_checkpoint",
    ],
    "agentcore.limits": [
        "MAX_ARGUMENT_BYTES", "MAX_ARGUMENT_DEPTH", "MAX_STATE_BYTES", "MAX_STATE_DEPTH",
        "MAX_STATE_STEERING", "MAX_TOOL_THREADS",
    ],
    "agentcore.models": [
        "AnthropicChatModel", "DEFAULT_MAX_PAUSE", "FallbackModel", "ModelPrices",
        "OpenAIChatModel", "PriceTable", "RateLimited", "RateLimiter",
        "RateLimiterStatistics", "ReplayModel", "SCHEMES", "StreamingFallbackModel",
        "StreamingRateLimited", "has_price", "load_prices", "model_name", "price",
        "resolve_model",
    ],
    "ledger": [
        "Chain", "ChainCheck", "Entry", "EntryKind", "Flaw", "JsonlSink", "LedgerError",
        "MemorySink", "Problem", "REDACTED", "Record", "Sink", "SinkClosedError",
        "SinkError", "SinkStatistics", "SqliteSink", "VerifyError", "VerifyReport",
        "check_chain", "query", "redact", "redact_record", "repair", "tail", "verify",
    ],
    "ledger.encoding": [
        "GENESIS", "canonical_body", "decode_line", "encode_entry", "entry_hash",
    ],
    "subagent": [
        "AlreadyResumedError", "Budget", "BudgetExceeded", "BudgetReport",
        "CheckpointError", "CheckpointRow", "Defaults", "Event", "EventKind",
        "InvalidArgumentsError", "InvalidHistoryError", "JsonSchemaOutput", "LoopStall",
        "MaxChildrenError", "MaxDepthError", "PausedTree", "Pool", "PoolClosedError",
        "PoolStatistics", "Recovered", "Result", "Spec", "SpecError", "SpecFile",
        "SpecFileError", "Spend", "SqliteCheckpoints", "Stream", "StreamStatistics",
        "SubagentError", "SubagentResultsTool", "SubagentTool", "Task", "TaskCancelled",
        "TaskError", "TaskFailed", "TaskPaused", "TaskStatus", "TaskTimeout",
        "UnknownAgentError", "UnreadRow", "load_specs", "open_pool", "specs_from_mapping",
    ],
    "subagent.aio": [
        "AioPool", "AioTask", "Stream", "TOOL_CANCEL_GRACE", "open_pool", "tool",
    ],
    "subagent.limits": [
        "MAX_CHECKPOINT_BYTES", "MAX_CHECKPOINT_ROWS", "MAX_HISTORY_BYTES",
        "MAX_HISTORY_MESSAGES", "MAX_RESUME_CLAIMS",
    ],
    "subagent.mcp": [
        "McpMessageError", "McpServer", "McpServerError", "McpSessions", "McpTool",
        "McpToolError", "open_mcp_sessions",
    ],
    "subagent.otel": [
        "EnvironmentTracing", "Instrumentation", "InstrumentationError", "OtelStatistics",
        "SpanLimits", "TracingSetupError", "instrument", "tracing_from_environment",
    ],
    "subagent.serve": [
        "BusyError", "ConflictError", "MAX_BODY_BYTES", "MAX_EVENTS", "NotFoundError", "ServeApp",
        "ServeError", "ServeStatistics", "TOKEN_VARIABLE", "app", "approve_on_the_page",
    ],
    "subagent.temporal": [
        "AdmissionState", "AdmissionWorkflow", "Answer", "ApprovalRequest", "BadAnswer",
        "DevServer", "DevServerError", "EventDecodeError", "EventsLost", "Heartbeat",
        "NotPaused", "PendingAnswers", "RootInput", "RootResult", "RunOptions",
        "StateTooLarge", "SubagentWorkflow", "TemporalError", "UnknownCall", "Worker",
        "admission_id", "admission_state", "approve", "controls_applied", "deny",
        "ensure_admission", "events", "interrupt", "ledger_name", "pending", "start",
        "steer", "tasks", "temporal_binary",
    ],
    "subagent.tools": [
        "Workspace", "WorkspaceError", "WorkspaceTool", "workspace_tools",
    ],
    "subagent.testing": [
        "Blocked", "Delayed", "EventLogError", "EventLogReport", "Job", "RecordingTool",
        "ScriptExhaustedError", "ScriptedModel", "StreamingScriptedModel", "Workload",
        "WorkloadModel", "check_events", "delegate_reply", "specs", "tool_call_reply",
        "workloads",
    ],
}

# old name -> where it lives now (kept for one release)
DEPRECATED: dict[str, dict[str, str]] = {
    "agentcore": {
        "Pending": "agentcore.InboxMessage",
        "INTERRUPTED": "agentcore.lowlevel.INTERRUPTED",
        "recover_calls": "agentcore.lowlevel.recover_calls",
        "start_checkpoint": "agentcore.lowlevel.start_checkpoint",
        "current_tool_call": "agentcore.lowlevel.current_tool_call",
        "CurrentToolCall": "agentcore.lowlevel.CurrentToolCall",
        "resumed_call_state": "agentcore.lowlevel.resumed_call_state",
        "MAX_ARGUMENT_BYTES": "agentcore.limits.MAX_ARGUMENT_BYTES",
        "MAX_ARGUMENT_DEPTH": "agentcore.limits.MAX_ARGUMENT_DEPTH",
        "MAX_STATE_BYTES": "agentcore.limits.MAX_STATE_BYTES",
        "MAX_STATE_DEPTH": "agentcore.limits.MAX_STATE_DEPTH",
        "MAX_STATE_STEERING": "agentcore.limits.MAX_STATE_STEERING",
        "MAX_TOOL_THREADS": "agentcore.limits.MAX_TOOL_THREADS",
    },
    "subagent": {
        "MAX_CHECKPOINT_BYTES": "subagent.limits.MAX_CHECKPOINT_BYTES",
        "MAX_CHECKPOINT_ROWS": "subagent.limits.MAX_CHECKPOINT_ROWS",
        "MAX_RESUME_CLAIMS": "subagent.limits.MAX_RESUME_CLAIMS",
        "MAX_HISTORY_BYTES": "subagent.limits.MAX_HISTORY_BYTES",
        "MAX_HISTORY_MESSAGES": "subagent.limits.MAX_HISTORY_MESSAGES",
    },
    "subagent.temporal": {
        "Pending": "subagent.temporal.PendingAnswers",
        "PendingCall": "subagent.temporal.ApprovalRequest",
    },
    "ledger": {
        "GENESIS": "ledger.encoding.GENESIS",
        "canonical_body": "ledger.encoding.canonical_body",
        "decode_line": "ledger.encoding.decode_line",
        "encode_entry": "ledger.encoding.encode_entry",
        "entry_hash": "ledger.encoding.entry_hash",
    },
}


def _public(module: types.ModuleType) -> list[str]:
    if hasattr(module, "__all__"):
        return sorted(module.__all__)
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, (types.ModuleType, __future__._Feature))
    )


def _object(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_names_are_the_listed_ones(name: str) -> None:
    assert _public(importlib.import_module(name)) == PUBLIC[name]


@pytest.mark.parametrize(
    ("package", "old"), [(p, old) for p, table in DEPRECATED.items() for old in table]
)
def test_an_old_name_still_imports_with_a_warning(package: str, old: str) -> None:
    new = DEPRECATED[package][old]
    module = importlib.import_module(package)
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(module, old)
    assert value is _object(new)
    assert [str(w.message) for w in caught] == [f"{package}.{old} is deprecated: use {new}"]
    assert caught[0].filename == __file__  # it points at the code using the old name
    assert old not in _public(module)


def test_from_import_of_an_old_name() -> None:
    with pytest.warns(DeprecationWarning, match=r"^agentcore\.Pending is deprecated"):
        from agentcore import Pending
    from agentcore import InboxMessage

    assert Pending is InboxMessage


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import agentcore

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=r"^module 'agentcore' has no attribute 'Nope'$"):
            agentcore.Nope  # noqa: B018
