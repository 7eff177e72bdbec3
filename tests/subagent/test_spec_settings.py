"""The agent settings on Spec and Defaults (issue 18 item 3): hooks, tool_timeout,
hook_timeout, retry, max_parallel_tools and history_limit. Each is observed on the
agent a task really runs: the spec's value wins, an unset one takes the defaults',
and with neither agentcore's own default holds. TOML specs set them too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from agentcore import (
    Event,
    Message,
    ModelRequest,
    RetryPolicy,
    Run,
    ToolCall,
    TransientModelError,
)
from agentcore.testing import RecordingTool, ScriptedModel, ScriptItem, tool_call_reply
from subagent import (
    Defaults,
    Result,
    Spec,
    SpecError,
    SpecFileError,
    TaskFailed,
    load_specs,
    open_pool,
    specs_from_mapping,
)
from subagent._pool._lifecycle import FRAMING

# Each inheritance case: (the spec's value, the defaults' value, expected observation
# key) where "spec", "defaults" or "agentcore" names whose value the run obeyed.
CASES = [("spec", "defaults", "spec"), (None, "defaults", "defaults"), (None, None, "agentcore")]


async def run_one(spec: Spec, defaults: Defaults) -> Result:
    async with open_pool(defaults=defaults) as pool:
        pool.register(spec)
        return await (await pool.submit(spec.name, "go")).wait()


class Recorder:
    """An event observer hook that keeps the kinds it saw."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    async def on_event(self, event: Event) -> None:
        self.kinds.append(str(event.kind))


@pytest.mark.parametrize(("own", "inherited", "expected"), CASES)
async def test_hooks(own: str | None, inherited: str | None, expected: str) -> None:
    recorders = {"spec": Recorder(), "defaults": Recorder()}
    spec = Spec("a", model=ScriptedModel(["done"]),
                hooks=None if own is None else [recorders[own]])
    defaults = Defaults(hooks=None if inherited is None else (recorders[inherited],))
    result = await run_one(spec, defaults)
    assert result.output == "done"
    for name, recorder in recorders.items():
        if name == expected:
            assert recorder.kinds[0] == "agent_start"
            assert recorder.kinds[-1] == "agent_end"
        else:
            assert recorder.kinds == []


async def test_empty_hooks_on_the_spec_override_the_defaults() -> None:
    recorder = Recorder()
    spec = Spec("a", model=ScriptedModel(["done"]), hooks=())
    assert (await run_one(spec, Defaults(hooks=[recorder]))).output == "done"
    assert recorder.kinds == []


class Clocked:
    """A scripted model that also records the virtual time of each call."""

    def __init__(self, script: list[ScriptItem]) -> None:
        self.model = ScriptedModel(self.answer)
        self.script = script
        self.times: list[float] = []
        self.requests: list[ModelRequest] = []

    def answer(self, request: ModelRequest) -> ScriptItem:
        self.times.append(trio.current_time())
        self.requests.append(request)
        return self.script[len(self.times) - 1]


@pytest.mark.parametrize(("own", "inherited", "expected"), CASES)
async def test_tool_timeout(
    autojump_clock: trio.testing.MockClock, own: str | None, inherited: str | None,
    expected: str,
) -> None:
    seconds = {"spec": 3.0, "defaults": 7.0, "agentcore": 120.0}
    clocked = Clocked([tool_call_reply("slow"), "done"])
    spec = Spec("a", model=clocked.model, tools=[RecordingTool("slow", delay=10_000.0)],
                tool_timeout=None if own is None else seconds[own], idle_timeout=None)
    defaults = Defaults(tool_timeout=None if inherited is None else seconds[inherited])
    start = trio.current_time()
    result = await run_one(spec, defaults)
    assert result.output == "done"
    assert [t - start for t in clocked.times] == [0.0, seconds[expected]]
    assert clocked.requests[1].messages[-1].content == (
        f"tool 'slow' timed out after {seconds[expected]:g}s"
    )


class SlowFirstModelHook:
    """A ``before_model`` interceptor whose first call never returns by itself."""

    def __init__(self) -> None:
        self.calls = 0

    async def before_model(self, run: Run, request: ModelRequest) -> None:
        self.calls += 1
        if self.calls == 1:
            await trio.sleep_forever()


@pytest.mark.parametrize(("own", "inherited", "expected"), CASES)
async def test_hook_timeout(
    autojump_clock: trio.testing.MockClock, own: str | None, inherited: str | None,
    expected: str,
) -> None:
    seconds = {"spec": 2.0, "defaults": 3.5, "agentcore": 5.0}
    clocked = Clocked(["done"])
    spec = Spec("a", model=clocked.model, hooks=[SlowFirstModelHook()],
                hook_timeout=None if own is None else seconds[own])
    defaults = Defaults(hook_timeout=None if inherited is None else seconds[inherited])
    start = trio.current_time()
    assert (await run_one(spec, defaults)).output == "done"
    assert [t - start for t in clocked.times] == [seconds[expected]]


@pytest.mark.parametrize(("own", "inherited", "expected"), CASES)
async def test_retry(
    autojump_clock: trio.testing.MockClock, own: str | None, inherited: str | None,
    expected: str,
) -> None:
    attempts = {"spec": 2, "defaults": 4, "agentcore": 3}
    policies = {k: RetryPolicy(max_attempts=n, base_delay=1.0, jitter=0.0)
                for k, n in attempts.items()}
    clocked = Clocked([TransientModelError("busy")] * 5)
    spec = Spec("a", model=clocked.model, retry=None if own is None else policies[own])
    defaults = Defaults(retry=None if inherited is None else policies[inherited])
    with pytest.raises(TaskFailed) as info:
        await run_one(spec, defaults)
    assert str(info.value) == "task a/0001 failed: TransientModelError: busy"
    assert len(clocked.times) == attempts[expected]


@pytest.mark.parametrize(("own", "inherited", "expected"), CASES)
async def test_max_parallel_tools(
    autojump_clock: trio.testing.MockClock, own: str | None, inherited: str | None,
    expected: str,
) -> None:
    limits = {"spec": 2, "defaults": 3, "agentcore": 8}
    reader = RecordingTool("look", read_only=True, delay=1.0)
    calls = tuple(ToolCall(f"c{i}", "look", "{}") for i in range(10))
    model = ScriptedModel([Message("assistant", "", tool_calls=calls), "done"])
    spec = Spec("a", model=model, tools=[reader],
                max_parallel_tools=None if own is None else limits[own])
    defaults = Defaults(max_parallel_tools=None if inherited is None else limits[inherited])
    assert (await run_one(spec, defaults)).output == "done"
    assert (len(reader.calls), reader.max_active) == (10, limits[expected])


@pytest.mark.parametrize(("own", "inherited", "expected"), CASES)
async def test_history_limit(own: str | None, inherited: str | None, expected: str) -> None:
    # The third request's history counts the system prompt (the subagent framing),
    # the input (2), then two rounds of a call ("t" and "{}": 3) and its 40-character
    # result. The oldest non-system messages go (a call with its result) until the
    # rest fits the limit; the newest round always stays.
    limits = {"spec": 50, "defaults": len(FRAMING) + 86}
    tool = RecordingTool("t", "r" * 40)
    clocked = Clocked([tool_call_reply("t"), tool_call_reply("t"), "done"])
    spec = Spec("a", model=clocked.model, tools=[tool], max_messages=None,
                history_limit=None if own is None else limits[own])
    defaults = Defaults(history_limit=None if inherited is None else limits[inherited])
    assert (await run_one(spec, defaults)).output == "done"
    roles = [m.role for m in clocked.requests[2].messages]
    assert roles == EXPECTED_ROLES[expected]


EXPECTED_ROLES = {
    "spec": ["system", "assistant", "tool"],
    "defaults": ["system", "assistant", "tool", "assistant", "tool"],
    "agentcore": ["system", "user", "assistant", "tool", "assistant", "tool"],
}


def test_settings_default_to_none_and_keep_positional_order() -> None:
    spec = Spec("a", "d", None, (), "p", "id", 3)
    assert (spec.description, spec.system_prompt, spec.agent_id, spec.max_turns) == (
        "d", "p", "id", 3,
    )
    for field in ("hooks", "tool_timeout", "hook_timeout", "retry", "max_parallel_tools",
                  "history_limit"):
        assert getattr(spec, field) is None
        assert getattr(Defaults(), field) is None
    assert Spec("a", hooks=[Recorder]).hooks == (Recorder,)


def test_toml_settings_parse_on_agents_and_defaults() -> None:
    model = ScriptedModel([])
    data: dict[str, Any] = {
        "defaults": {"tool_timeout": 30, "hook_timeout": 1.5, "max_parallel_tools": 2,
                     "history_limit": 9000, "retry": {"max_attempts": 5, "jitter": 0}},
        "agents": {
            "a": {"model": "m", "tool_timeout": 2.5, "max_parallel_tools": 4,
                  "retry": {"base_delay": 0, "factor": 3, "max_delay": 10,
                            "context_retries": 0, "length_retries": 1}},
            "b": {"model": "m"},
        },
    }
    specs = specs_from_mapping(data, resolve_model=lambda name: model)
    d = specs.defaults
    assert (d.tool_timeout, d.hook_timeout, d.max_parallel_tools, d.history_limit) == (
        30.0, 1.5, 2, 9000,
    )
    assert d.retry == RetryPolicy(max_attempts=5, jitter=0.0)
    a, b = specs.specs
    assert (a.tool_timeout, a.hook_timeout, a.max_parallel_tools, a.history_limit) == (
        2.5, None, 4, None,
    )
    assert a.retry == RetryPolicy(base_delay=0.0, factor=3.0, max_delay=10.0,
                                  context_retries=0, length_retries=1)
    assert isinstance(a.retry.factor, float)
    resolved = b.inherit(d)
    assert (resolved.tool_timeout, resolved.retry) == (30.0, d.retry)
    assert resolved.hooks is None


def test_toml_file_with_a_retry_table(tmp_path: Path) -> None:
    path = tmp_path / "specs.toml"
    path.write_text(
        '[defaults]\nhook_timeout = 2\nretry = { max_attempts = 5, max_delay = 30.0 }\n'
        '[agents.a]\nmodel = "m"\nhistory_limit = 4000\n'
        '[agents.a.retry]\nmax_attempts = 1\nlength_retries = 0\n'
    )
    model = ScriptedModel([])
    specs = load_specs(path, resolve_model=lambda name: model)
    assert specs.defaults.retry == RetryPolicy(max_attempts=5, max_delay=30.0)
    assert specs.defaults.hook_timeout == 2.0
    (a,) = specs.specs
    assert (a.history_limit, a.retry) == (4000, RetryPolicy(max_attempts=1, length_retries=0))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agents": {"a": {"model": "m", "tool_timeout": 0}}},
         "agent 'a' field 'tool_timeout': must be a positive number of seconds, not 0"),
        ({"agents": {"a": {"model": "m", "hook_timeout": "5"}}},
         "agent 'a' field 'hook_timeout': must be a number of seconds, not a string ('5')"),
        ({"agents": {"a": {"model": "m", "hook_timeout": float("nan")}}},
         "agent 'a' field 'hook_timeout': must be a positive number of seconds, not nan"),
        ({"agents": {"a": {"model": "m", "max_parallel_tools": 0}}},
         "agent 'a' field 'max_parallel_tools': must be at least 1, not 0"),
        ({"agents": {"a": {"model": "m", "history_limit": 2.5}}},
         "agent 'a' field 'history_limit': must be an integer, not a number (2.5)"),
        ({"agents": {"a": {"model": "m", "hooks": ["x"]}}},
         "agent 'a' field 'hooks': unknown; the fields are agent_id, budget, critical, "
         "delegates_to, "
         "description, history_limit, hook_timeout, idle_timeout, limits, max_children, "
         "max_messages, max_parallel_tools, max_turns, model, output_retries, output_schema, "
         "retry, system_prompt, timeout, "
         "tool_timeout, tools"),
        ({"agents": {"a": {"model": "m", "retry": 3}}},
         "agent 'a' field 'retry': must be a table, not an integer (3)"),
        ({"agents": {"a": {"model": "m", "retry": {"attempts": 3}}}},
         "agent 'a' field 'retry' key 'attempts': unknown; the keys are max_attempts, "
         "base_delay, factor, max_delay, jitter, context_retries, length_retries"),
        ({"agents": {"a": {"model": "m", "retry": {"max_attempts": 0}}}},
         "agent 'a' field 'retry' key 'max_attempts': must be positive and finite, not 0"),
        ({"agents": {"a": {"model": "m", "retry": {"max_attempts": 2.0}}}},
         "agent 'a' field 'retry' key 'max_attempts': must be an integer, not a number (2.0)"),
        ({"agents": {"a": {"model": "m", "retry": {"context_retries": -1}}}},
         "agent 'a' field 'retry' key 'context_retries': must be not negative and finite, "
         "not -1"),
        ({"agents": {"a": {"model": "m", "retry": {"factor": 0}}}},
         "agent 'a' field 'retry' key 'factor': must be positive and finite, not 0.0"),
        ({"agents": {"a": {"model": "m", "retry": {"max_delay": float("inf")}}}},
         "agent 'a' field 'retry' key 'max_delay': must be not negative and finite, not inf"),
        ({"agents": {"a": {"model": "m", "retry": {"max_delay": 10**400}}}},
         "agent 'a' field 'retry' key 'max_delay': must be not negative and finite, not inf"),
        ({"agents": {"a": {"model": "m", "retry": {"base_delay": float("nan")}}}},
         "agent 'a' field 'retry' key 'base_delay': must be not negative and finite, not nan"),
        ({"agents": {"a": {"model": "m", "retry": {"jitter": 1.5}}}},
         "agent 'a' field 'retry' key 'jitter': must be at most 1, not 1.5"),
        ({"agents": {"a": {"model": "m", "retry": {"jitter": True}}}},
         "agent 'a' field 'retry' key 'jitter': must be a number, not a boolean (True)"),
        ({"defaults": {"tool_timeout": -1}, "agents": {"a": {"model": "m"}}},
         "[defaults] field 'tool_timeout': must be a positive number of seconds, not -1"),
        ({"defaults": {"max_parallel_tools": True}, "agents": {"a": {"model": "m"}}},
         "[defaults] field 'max_parallel_tools': must be an integer, not a boolean (True)"),
        ({"defaults": {"retry": {"factor": "x"}}, "agents": {"a": {"model": "m"}}},
         "[defaults] field 'retry' key 'factor': must be a number, not a string ('x')"),
        ({"defaults": {"hooks": []}, "agents": {"a": {"model": "m"}}},
         "[defaults] field 'hooks': unknown; the fields are model, agent_id, limits, "
         "tool_timeout, hook_timeout, max_parallel_tools, history_limit, retry, output_retries, "
         "budget"),
    ],
)
def test_toml_settings_reject_bad_values(data: dict[str, Any], message: str) -> None:
    model = ScriptedModel([])
    with pytest.raises(SpecFileError) as info:
        specs_from_mapping(data, resolve_model=lambda name: model)
    assert str(info.value) == f"<mapping>: {message}"


@pytest.mark.parametrize(
    ("field", "value", "text"),
    [
        ("tool_timeout", 0.0, "tool_timeout must be positive or None, not 0.0"),
        ("hook_timeout", float("nan"), "hook_timeout must be positive or None, not nan"),
        ("max_parallel_tools", 0, "max_parallel_tools must be at least 1, not 0"),
        ("history_limit", -5, "history_limit must be at least 1, not -5"),
        ("retry", 3, "retry must be an agentcore.RetryPolicy, not int"),
    ],
)
async def test_register_rejects_bad_settings(field: str, value: object, text: str) -> None:
    async with open_pool() as pool:
        with pytest.raises(SpecError) as info:
            pool.register(Spec("a", model=ScriptedModel([]), **{field: value}))  # type: ignore[arg-type]
        assert str(info.value) == f"spec 'a': {text}"
