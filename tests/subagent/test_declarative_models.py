"""Specs files: ``model = [...]`` fallback lists and shared ``[limits.NAME]`` tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from agentcore import ChatModel, Message, ModelRequest
from agentcore.models import FallbackModel, RateLimited
from agentcore.testing import ScriptedModel
from subagent._specs._file import SpecFile, SpecFileError, load_specs, specs_from_mapping


def resolver() -> tuple[dict[str, ChatModel], Any]:
    made: dict[str, ChatModel] = {}

    def resolve(text: str) -> ChatModel:
        if not text.startswith("fake:"):
            raise ValueError(f"Unknown model spec {text!r}")
        return made.setdefault(text, ScriptedModel(["ok"] * 10))

    return made, resolve


def load(tmp_path: Path, text: str) -> tuple[SpecFile, dict[str, ChatModel]]:
    path = tmp_path / "specs.toml"
    path.write_text(text)
    made, resolve = resolver()
    return load_specs(path, resolve_model=resolve), made


def test_a_list_of_models_is_a_fallback_in_order(tmp_path: Path) -> None:
    specs, made = load(tmp_path, """
[defaults]
model = ["fake:c"]
[agents.a]
model = ["fake:a", "fake:b"]
""")
    model = specs.specs[0].model
    assert isinstance(model, FallbackModel)
    assert model.models == (made["fake:a"], made["fake:b"])
    assert specs.defaults.model is made["fake:c"]  # a list of one is that model


async def test_agents_naming_one_limits_table_share_its_limiter(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    specs, made = load(tmp_path, """
[limits.shared]
requests_per_minute = 30
[limits.tokens]
tokens_per_minute = 6000
[defaults]
model = "fake:default"
limits = "tokens"
[agents.a]
model = "fake:a"
limits = "shared"
[agents.b]
limits = "shared"
[agents.c]
[agents.d]
model = "fake:d"
""")
    a, b, c, d = (s.model for s in specs.specs)
    assert isinstance(a, RateLimited) and isinstance(b, RateLimited)
    assert a.limiter is b.limiter
    assert (a.model, b.model) == (made["fake:a"], made["fake:default"])  # not limited twice
    assert c is None and d is made["fake:d"]  # c inherits the defaults' limited model
    default = specs.defaults.model
    assert isinstance(default, RateLimited) and default.model is made["fake:default"]
    assert default.limiter.buckets.tokens_per_minute == 6000.0
    assert default.limiter is not a.limiter
    # One call every 2 s between them, whichever agent makes it.
    request = ModelRequest((Message("user", "hi"),))
    for model in (a, b, a):
        await model.complete(request)
    assert trio.current_time() == 4.0
    assert a.limiter.statistics().started == 3


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"limits": {"x": {"requests_per_minute": "fast"}}},
         "[limits.x] field 'requests_per_minute': must be a positive number a minute, "
         "not a string ('fast')"),
        ({"limits": {"x": {"tokens_per_minute": 0}}},
         "[limits.x] field 'tokens_per_minute': must be a positive number a minute, "
         "not an integer (0)"),
        ({"limits": {"x": {"tokens_per_minute": True}}},
         "[limits.x] field 'tokens_per_minute': must be a positive number a minute, "
         "not a boolean (True)"),
        ({"limits": {"x": {"tokens_per_minute": float("nan")}}},
         "[limits.x] field 'tokens_per_minute': must be a positive number a minute, "
         "not a number (nan)"),
        ({"limits": {"x": {"requests_per_minute": 10**5000}}},
         "[limits.x] field 'requests_per_minute': must be a positive number a minute, "
         "not an integer ((an integer too long to show))"),
        ({"limits": {"x": {}}},
         "[limits.x]: names no limit; give requests_per_minute or tokens_per_minute"),
        ({"limits": {"x": {"burst": 3}}},
         "[limits.x] field 'burst': unknown; the fields are requests_per_minute, "
         "tokens_per_minute"),
        ({"limits": {"x": 3}}, "[limits.x]: must be a table, not an integer (3)"),
        ({"limits": 3}, "[limits]: must be a table, not an integer (3)"),
        ({"agents": {"a": {"model": "fake:a", "limits": "y"}}},
         "agent 'a' field 'limits': no [limits.y] table; known limits: none are defined"),
        ({"limits": {"x": {"requests_per_minute": 1}},
          "agents": {"a": {"model": "fake:a", "limits": "y"}}},
         "agent 'a' field 'limits': no [limits.y] table; known limits: x"),
        ({"limits": {"x": {"requests_per_minute": 1}}, "agents": {"a": {"limits": "x"}}},
         "agent 'a' field 'limits': no model to limit: give it a model or [defaults] one"),
        ({"limits": {"x": {"requests_per_minute": 1}}, "defaults": {"limits": "x"}},
         "[defaults] field 'limits': no model to limit: give it a model or [defaults] one"),
        ({"agents": {"a": {"model": "fake:a", "limits": ["x"]}}},
         "agent 'a' field 'limits': must be a string, not a list"),
        ({"agents": {"a": {"model": []}}}, "agent 'a' field 'model': an empty list names no model"),
        ({"agents": {"a": {"model": ["fake:a", 3]}}},
         "agent 'a' field 'model' [1]: must be a string, not an integer (3)"),
        ({"agents": {"a": {"model": ["fake:a", "nope:b"]}}},
         "agent 'a' field 'model' [1]: Unknown model spec 'nope:b'"),
        ({"defaults": {"model": "fake:a", "colour": 1}},
         "[defaults] field 'colour': unknown; the fields are model, agent_id, limits, "
         "tool_timeout, hook_timeout, max_parallel_tools, history_limit, retry, output_retries, "
         "budget"),
    ],
)
def test_bad_models_and_limits_name_the_field(data: dict[str, Any], message: str) -> None:
    data = {"agents": {"ok": {"model": "fake:z"}}, **data}
    _, resolve = resolver()
    with pytest.raises(SpecFileError) as info:
        specs_from_mapping(data, resolve_model=resolve)
    assert str(info.value) == f"<mapping>: {message}"


def test_a_specs_file_read_before_trio_runs_limits_inside_it(tmp_path: Path) -> None:
    specs, _ = load(tmp_path, """
[limits.x]
requests_per_minute = 30
[agents.a]
model = "fake:a"
limits = "x"
""")
    model = specs.specs[0].model
    assert model is not None

    async def main() -> float:
        request = ModelRequest((Message("user", "hi"),))
        await model.complete(request)
        await model.complete(request)
        return trio.current_time()

    clock = trio.testing.MockClock(autojump_threshold=0)
    clock.jump(100.0)  # the limiter's clock starts at its first call, not at 0
    assert trio.run(main, clock=clock) == 102.0
