"""FallbackModel: which errors fall through, in what order retries happen, who answered."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from agentcore import (
    Agent,
    ChatModel,
    ConfigurationError,
    ContextTooLongError,
    Event,
    EventKind,
    Message,
    ModelError,
    ModelRequest,
    RetryPolicy,
    StreamingChatModel,
    TransientModelError,
    Usage,
)
from agentcore._messages import MIXED_MODELS
from agentcore.models import FallbackModel, StreamingFallbackModel, model_name, resolve_model
from agentcore.testing import Delayed, ScriptedModel, ScriptItem, StreamingScriptedModel
from tests.models._support import Deltas

REQUEST = ModelRequest((Message("user", "hi"),))
EXACT = RetryPolicy(base_delay=1.0, factor=2.0, jitter=0.0)


class Named(ScriptedModel):
    """A scripted model with a name, as the adapters have (their model id)."""

    def __init__(self, name: str, script: list[ScriptItem], **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self.model = name


class NamedStreaming(StreamingScriptedModel):
    def __init__(self, name: str, script: list[ScriptItem], **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self.model = name


def busy(seconds: float | None = None) -> TransientModelError:
    return TransientModelError("api API error (HTTP 429): slow down", retry_after=seconds)


async def test_a_transient_error_asks_the_next_model_which_is_named_in_the_usage() -> None:
    first = Named("gpt-4o-mini", [busy()])
    second = Named("claude-haiku-4-5", ["hello"], usage=Usage(3, 4))
    model = FallbackModel(first, second)
    response = await model.complete(REQUEST)
    assert response.message.content == "hello"
    assert response.usage == Usage(3, 4, model="claude-haiku-4-5")
    assert (len(first.requests), len(second.requests)) == (1, 1)
    assert model.name == "gpt-4o-mini|claude-haiku-4-5"
    assert isinstance(model, ChatModel) and not isinstance(model, StreamingFallbackModel)


async def test_the_model_an_adapter_reported_is_kept() -> None:
    reported = Usage(1, 2, model="gpt-4o-mini-2024-07-18")
    model = FallbackModel(Named("gpt-4o-mini", ["ok"], usage=reported))
    assert (await model.complete(REQUEST)).usage == reported


async def test_an_error_not_listed_propagates_and_the_next_model_is_not_asked() -> None:
    second = Named("b", ["never"])
    model = FallbackModel(Named("a", [ModelError("api API error (HTTP 400): bad")]), second)
    with pytest.raises(ModelError, match=r"^api API error \(HTTP 400\): bad$") as info:
        await model.complete(REQUEST)
    assert type(info.value) is ModelError
    assert second.requests == []


async def test_listed_errors_fall_through_and_others_do_not() -> None:
    model = FallbackModel(
        Named("a", [ContextTooLongError("too long")]),
        Named("b", [busy()]),
        Named("c", ["fine"]),
        on=(ContextTooLongError,),
    )
    with pytest.raises(TransientModelError, match="slow down"):
        await model.complete(REQUEST)


async def test_when_all_fail_the_error_names_each_model_and_is_of_the_last_kind() -> None:
    first = Named("a", [ModelError("a broke")])
    model = FallbackModel(first, Named("b", [busy(7.0)]), on=(ModelError,))
    with pytest.raises(TransientModelError) as info:
        await model.complete(REQUEST)
    assert str(info.value) == (
        "all 2 models failed: a: a broke; b: api API error (HTTP 429): slow down"
    )
    assert info.value.retry_after == 7.0
    assert isinstance(info.value.__cause__, TransientModelError)


async def test_a_long_error_is_cut_in_the_summary() -> None:
    model = FallbackModel(Named("a", [busy()]), Named("b", [ContextTooLongError("x" * 1000)]),
                          on=(TransientModelError, ContextTooLongError))
    with pytest.raises(ContextTooLongError) as info:
        await model.complete(REQUEST)
    assert str(info.value).endswith("b: " + "x" * 297 + "...")


async def test_an_error_that_is_not_a_model_error_keeps_its_type_with_notes() -> None:
    model = FallbackModel(Named("a", [OSError("gone")]), Named("b", [OSError("also")]),
                          on=OSError)
    with pytest.raises(OSError) as info:
        await model.complete(REQUEST)
    assert str(info.value) == "also"
    assert info.value.__notes__ == ["FallbackModel: earlier failure: a: gone"]


async def test_per_model_retries_come_first_with_exact_delays(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # a: fails at 0, retried at 1 (base delay), fails, retried at 1 + 2 (Retry-After 2
    # wins), fails again: max_attempts reached, b answers at once.
    first = Named("a", [busy(), busy(2.0), busy()])
    second = Named("b", ["ok"])
    model = FallbackModel(first, second, retry=EXACT)
    start = trio.current_time()
    response = await model.complete(REQUEST)
    assert trio.current_time() - start == 3.0
    assert response.usage.model == "b"
    assert (len(first.requests), len(second.requests)) == (3, 1)


async def test_without_its_own_retries_the_agent_retries_the_whole_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    first = Named("a", [busy(), Delayed(0.5, "late")])
    second = Named("b", [busy()])
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    agent = Agent(model=FallbackModel(first, second), retry=EXACT)
    start = trio.current_time()
    result = await agent.run("hi", emit=emit)
    # Both fail at 0; the loop sleeps its 1 s; a answers after 0.5 s.
    assert trio.current_time() - start == 1.5
    assert result.output == "late"
    retries = [e.text for e in events if e.kind is EventKind.retry]
    assert retries == [
        "TransientModelError: all 2 models failed: a: api API error (HTTP 429): slow down; "
        "b: api API error (HTTP 429): slow down; retrying in 1s"
    ]
    [answered] = [e for e in events if e.kind is EventKind.model_response]
    assert answered.usage == Usage(model="a")


async def test_a_cancelled_call_is_not_a_failure() -> None:
    second = Named("b", ["never"])
    model = FallbackModel(Named("a", [Delayed(10, "late")]), second)
    with trio.move_on_after(0) as scope:
        await model.complete(REQUEST)
    assert scope.cancelled_caught and second.requests == []


async def test_models_that_all_stream_make_a_streaming_fallback() -> None:
    first = NamedStreaming("a", [busy()])
    second = NamedStreaming("b", ["hello world"], chunk=5)
    model = FallbackModel(first, second)
    assert isinstance(model, StreamingFallbackModel)
    assert isinstance(model, StreamingChatModel)
    deltas = Deltas()
    response = await model.stream(REQUEST, deltas)
    assert deltas == ["hello", " worl", "d"]
    assert response.usage.model == "b"


async def test_one_member_that_does_not_stream_makes_it_complete_only() -> None:
    model = FallbackModel(NamedStreaming("a", ["x"]), Named("b", ["y"]))
    assert type(model) is FallbackModel
    assert not isinstance(model, StreamingChatModel)
    assert not hasattr(model, "stream")


async def test_a_streaming_agent_reports_the_model_that_answered() -> None:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    model = FallbackModel(NamedStreaming("a", [busy()]), NamedStreaming("b", ["hey"]))
    result = await Agent(model=model).run("hi", emit=emit)
    assert result.output == "hey"
    assert [e.text for e in events if e.kind is EventKind.model_delta] == ["hey"]
    [answered] = [e for e in events if e.kind is EventKind.model_response]
    assert answered.usage is not None and answered.usage.model == "b"


def test_bad_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="on= takes exception classes, not 'x'"):
        FallbackModel(Named("a", []), on=("x",))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="takes ChatModels, and 3 has no complete"):
        FallbackModel(Named("a", []), 3)  # type: ignore[arg-type]


def test_model_names() -> None:
    assert model_name(Named("gpt", [])) == "gpt"
    assert model_name(ScriptedModel([])) == "ScriptedModel"
    inner = FallbackModel(Named("a", []), Named("b", []))
    assert model_name(FallbackModel(inner, Named("c", []))) == "a|b|c"


def test_a_list_of_model_specs_resolves_to_a_fallback(tmp_path: Any) -> None:
    replay = tmp_path / "r.json"
    replay.write_text('[{"content": "hi"}]')
    model = resolve_model(["scripted:r.json", "scripted:r.json"], base_dir=tmp_path)
    assert isinstance(model, StreamingFallbackModel) and len(model.models) == 2
    single = resolve_model(["scripted:r.json"], base_dir=tmp_path)
    assert not isinstance(single, FallbackModel)
    with pytest.raises(ValueError, match=r"^An empty list of model specs names no model$"):
        resolve_model([])
    with pytest.raises(ValueError, match=r"^Model spec 1 of the list: Unknown model spec 'x'"):
        resolve_model(["scripted:r.json", "x"], base_dir=tmp_path)
    with pytest.raises(ValueError, match=r"^Model spec 0 of the list is not a string$"):
        resolve_model([3])  # type: ignore[list-item]


def test_usage_sums_keep_the_model_only_when_one_is_named() -> None:
    a, b = Usage(1, 2, model="a"), Usage(3, 4, model="b")
    assert Usage(1, 2) == Usage(input_tokens=1, output_tokens=2, model="")
    assert Usage() + a == a + Usage() == a
    assert a + a == Usage(2, 4, model="a")
    assert a + b == Usage(4, 6, model=MIXED_MODELS)
    assert (a + b) + a == a + (b + a) == Usage(5, 8, model="(mixed)")
