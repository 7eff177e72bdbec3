"""Specs and Defaults (SPEC 3.1): inheritance and rejection at registration."""

from __future__ import annotations

import attrs
import pytest

from agentcore import GateDecision, GateRequest, allow_all
from agentcore.testing import RecordingTool, ScriptedModel
from ledger import MemorySink
from subagent import Defaults, Spec, SpecError, open_pool


async def deny(request: GateRequest) -> GateDecision:
    return GateDecision(False, "no")


def test_spec_inherits_unset_fields() -> None:
    model, audit = ScriptedModel([]), MemorySink()
    defaults = Defaults(model=model, gate=allow_all, audit=audit, agent_id="app")
    resolved = Spec("a").inherit(defaults)
    assert (resolved.model, resolved.gate, resolved.audit, resolved.agent_id) == (
        model, allow_all, audit, "app",
    )


def test_spec_fields_win_over_defaults() -> None:
    own_model, own_audit = ScriptedModel([]), MemorySink()
    spec = Spec("a", model=own_model, gate=deny, audit=own_audit, agent_id="mine")
    resolved = spec.inherit(Defaults(model=ScriptedModel([]), gate=allow_all,
                                     audit=MemorySink(), agent_id="app"))
    assert resolved == spec


def test_agent_id_falls_back_to_the_name() -> None:
    assert Spec("a", model=ScriptedModel([])).inherit(Defaults()).agent_id == "a"


def test_spec_is_immutable_and_tools_a_tuple() -> None:
    tool = RecordingTool()
    spec = Spec("a", tools=[tool])
    assert spec.tools == (tool,)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        spec.name = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (Spec("a"), "spec 'a': no model: give the spec a model or the pool a default model"),
        (Spec("", model=ScriptedModel([])), "a spec's name must be non-empty without '/', not ''"),
        (Spec("a/b", model=ScriptedModel([])),
         "a spec's name must be non-empty without '/', not 'a/b'"),
        (Spec("a", model=ScriptedModel([]), max_turns=0),
         "spec 'a': max_turns must be at least 1, not 0"),
        (Spec("a", model=ScriptedModel([]), timeout=0),
         "spec 'a': timeout must be positive or None, not 0"),
        (Spec("a", model=ScriptedModel([]), idle_timeout=-1.0),
         "spec 'a': idle_timeout must be positive or None, not -1.0"),
        (Spec("a", model=ScriptedModel([]), max_children=0),
         "spec 'a': max_children must be at least 1, not 0"),
        (Spec("a", model=ScriptedModel([]), tools=[RecordingTool("t"), RecordingTool("t")]),
         "spec 'a': Agent has two tools named 't'"),
        (Spec("a", model=ScriptedModel([]), delegates_to=["b", "c/d"]),
         "spec 'a': delegates_to must list agent names (non-empty, without '/'), not 'c/d'"),
        (Spec("a", model=ScriptedModel([]), delegates_to=[""]),
         "spec 'a': delegates_to must list agent names (non-empty, without '/'), not ''"),
        (Spec("a", model=ScriptedModel([]), delegates_to=[3]),  # type: ignore[list-item]
         "spec 'a': delegates_to must list agent names (non-empty, without '/'), not 3"),
    ],
)
async def test_register_rejects_unusable_specs(spec: Spec, message: str) -> None:
    async with open_pool() as pool:
        with pytest.raises(SpecError) as info:
            pool.register(spec)
        assert str(info.value) == message
        assert pool.specs == {}


async def test_register_replaces_by_name() -> None:
    first, second = ScriptedModel(["one"]), ScriptedModel(["two"])
    async with open_pool(defaults=Defaults(agent_id="app")) as pool:
        pool.register(Spec("a", model=first))
        pool.register(Spec("a", model=second, description="v2"))
        assert list(pool.specs) == ["a"]
        assert pool.specs["a"] == Spec("a", model=second, description="v2", agent_id="app")
        result = await (await pool.submit("a", "x")).wait()
    assert result.output == "two"


def test_delegates_to_is_a_tuple_of_names() -> None:
    assert Spec("a").delegates_to is None
    assert Spec("a", delegates_to=["b", "c"]).delegates_to == ("b", "c")
    assert Spec("a", delegates_to=()).delegates_to == ()
    with pytest.raises(SpecError) as info:
        Spec("a", delegates_to="bc")
    assert str(info.value) == (
        "Spec delegates_to must be a sequence of agent names, not the string 'bc'"
    )
