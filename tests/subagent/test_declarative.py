"""Specs from TOML files and mappings; errors name the file, the agent and the field."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore import ChatModel, FunctionTool
from agentcore.models import ReplayModel
from agentcore.testing import ScriptedModel
from subagent._specs._file import SpecFile, SpecFileError, load_specs, specs_from_mapping

MODELS: dict[str, ChatModel] = {}


def fake_resolver(text: str) -> ChatModel:
    if not text.startswith("fake:"):
        raise ValueError(f"Unknown model spec {text!r}")
    return MODELS.setdefault(text, ScriptedModel(["ok"]))


async def noop(arguments: str) -> str:
    return arguments


MINE = FunctionTool("mine", "my own tool", {"type": "object"}, noop)

GOOD = """
[pool]
max_concurrent = 2
children_timeout = 5

[defaults]
model = "fake:default"

[agents.coordinator]
description = "Plans and delegates."
system_prompt = "You coordinate."
tools = ["subagent", "mine", "subagent_results"]
max_turns = 4
critical = true
max_messages = 20

[agents.reader]
model = "fake:reader"
tools = ["read_file", "grep"]
idle_timeout = false
timeout = 90
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "specs.toml"
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str, **kw: Any) -> SpecFile:
    kw.setdefault("resolve_model", fake_resolver)
    return load_specs(write(tmp_path, text), tools={"mine": MINE}, **kw)


def test_loads_agents_pool_and_defaults(tmp_path: Path) -> None:
    specs = load(tmp_path, GOOD, workspace=tmp_path)
    assert specs.pool == {"max_concurrent": 2, "children_timeout": 5.0}
    assert specs.defaults.model is MODELS["fake:default"]
    coordinator, reader = specs.specs
    assert coordinator.name == "coordinator"
    assert coordinator.description == "Plans and delegates."
    assert coordinator.model is None  # inherits the default when registered
    assert coordinator.tools == (MINE,)
    assert (coordinator.max_turns, coordinator.critical, coordinator.max_messages) == (4, True, 20)
    assert reader.model is MODELS["fake:reader"]
    assert [t.name for t in reader.tools] == ["read_file", "grep"]
    assert (reader.idle_timeout, reader.timeout) == (None, 90.0)
    assert specs.pool_tools == {
        "coordinator": ("subagent", "subagent_results"), "reader": ()
    }
    delegate = FunctionTool("subagent", "delegate", {"type": "object"}, noop)
    wait = FunctionTool("subagent_results", "wait", {"type": "object"}, noop)
    bound = specs.specs_for({"subagent": delegate, "subagent_results": wait})
    assert bound[0].tools == (MINE, delegate, wait)
    assert bound[1] is reader


def test_scripted_model_is_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "replies.json").write_text(json.dumps([{"content": "hi"}]))
    specs = load_specs(
        write(tmp_path, '[agents.a]\nmodel = "scripted:replies.json"\n')
    )
    assert isinstance(specs.specs[0].model, ReplayModel)


def test_same_as_mapping() -> None:
    specs = specs_from_mapping(
        {"agents": {"a": {"model": "fake:x", "tools": ["mine"]}}},
        tools={"mine": MINE},
        resolve_model=fake_resolver,
    )
    assert specs.source == "<mapping>"
    assert specs.specs[0].tools == (MINE,)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[agents.a]\nmodel = "fake:x"\nmax_turns = "ten"\n',
         "agent 'a' field 'max_turns': must be an integer, not a string ('ten')"),
        ('[agents.a]\nmodel = "fake:x"\nmax_turns = 0\n',
         "agent 'a' field 'max_turns': must be at least 1, not 0"),
        ('[agents.a]\nmodel = "fake:x"\ntimeout = -1\n',
         "agent 'a' field 'timeout': must be a positive number of seconds, not -1"),
        ('[agents.a]\nmodel = "fake:x"\ncritical = "yes"\n',
         "agent 'a' field 'critical': must be true or false, not a string ('yes')"),
        ('[agents.a]\nmodel = "fake:x"\ntools = ["nope"]\n',
         "agent 'a' field 'tools': unknown tool 'nope'; known tools: grep, list_dir, "
         "mine, read_file, subagent, subagent_results, write_file"),
        ('[agents.a]\nmodel = "fake:x"\ntools = ["read_file"]\n',
         "agent 'a' field 'tools': tool 'read_file' needs a workspace root, and none was given"),
        ('[agents.a]\nmodel = "fake:x"\ntools = ["mine", "mine"]\n',
         "agent 'a' field 'tools': names tool 'mine' twice"),
        ('[agents.a]\nmodel = "nope:x"\n',
         "agent 'a' field 'model': Unknown model spec 'nope:x'"),
        ('[agents.a]\nmodel = "fake:x"\ncolour = "red"\n',
         "agent 'a' field 'colour': unknown; the fields are agent_id, budget, critical, "
         "delegates_to, "
         "description, history_limit, hook_timeout, "
         "idle_timeout, limits, max_children, max_messages, max_parallel_tools, max_turns, "
         "model, output_retries, output_schema, retry, system_prompt, timeout, tool_timeout, "
         "tools"),
        ("[agents.a]\ndescription = 'no model'\n",
         "agent 'a': spec 'a': no model: give the spec a model or the pool a default model"),
        ('[pool]\nmax_concurrent = 1.5\n[agents.a]\nmodel = "fake:x"\n',
         "[pool] field 'max_concurrent': must be an integer, not a number (1.5)"),
        ('[pool]\nworkers = 3\n[agents.a]\nmodel = "fake:x"\n',
         "[pool] field 'workers': unknown; the fields are max_concurrent, max_queued, "
         "max_depth, max_children, children_timeout, budget"),
        ("[pool]\n", "[agents]: no agents are defined"),
        ('agents = 3\n', "[agents]: must be a table, not an integer (3)"),
        ('[agents.a]\nmodel = "fake:x"\n[extra]\n',
         "key 'extra': unknown; the top-level tables are pool, limits, defaults, agents, mcp"),
    ],
)
def test_errors_name_file_agent_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecFileError) as info:
        load(tmp_path, text)
    assert str(info.value) == f"{tmp_path / 'specs.toml'}: {message}"


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecFileError) as info:
        load(tmp_path, "[agents.a\n")
    assert str(info.value).startswith(f"{tmp_path / 'specs.toml'}: invalid TOML: ")
    with pytest.raises(SpecFileError) as info:
        load_specs(tmp_path / "missing.toml")
    assert str(info.value) == (
        f"{tmp_path / 'missing.toml'}: cannot read the specs file: No such file or directory"
    )


def test_loader_names_are_exported() -> None:
    import subagent
    from subagent._specs import _file as _declarative

    assert subagent.load_specs is _declarative.load_specs
    assert subagent.specs_from_mapping is _declarative.specs_from_mapping
    assert subagent.SpecFileError is _declarative.SpecFileError
    assert issubclass(subagent.SpecFileError, subagent.SpecError)


@pytest.fixture
def no_hang() -> Iterator[None]:
    # A FIFO opened for reading without O_NONBLOCK waits for a writer forever.
    def hang(signum: int, frame: object) -> None:
        raise AssertionError("the loader waited on the file")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.usefixtures("no_hang")
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/dev/zero", "it is a character device, not a regular file"),
        ("fifo", "it is a FIFO, not a regular file"),
        ("link-to-fifo", "it is a FIFO, not a regular file"),
        ("folder", "it is a directory, not a regular file"),
        ("huge.json", "it is larger than the limit of 16777216 bytes"),
        ("missing.json", "No such file or directory"),
        ("bad\x00name", "the path holds a NUL character"),
        ("latin1.json", "it is not UTF-8 text"),
    ],
)
def test_scripted_file_must_be_a_small_regular_file(
    tmp_path: Path, name: str, reason: str
) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link-to-fifo").symlink_to(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    with open(tmp_path / "huge.json", "wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)  # sparse: no disk used
    (tmp_path / "latin1.json").write_bytes(b'[{"content": "caf\xe9"}]')
    specs = write(tmp_path, f"[agents.a]\nmodel = {json.dumps('scripted:' + name)}\n")
    with pytest.raises(SpecFileError) as info:
        load_specs(specs)
    shown = name if name.startswith("/") else str(tmp_path / name)
    assert str(info.value) == (
        f"{specs}: agent 'a' field 'model': Cannot read replay file {shown!r}: {reason}"
    )


def test_scripted_file_may_be_any_regular_file_the_specs_name(tmp_path: Path) -> None:
    # Documented decision: the specs author chooses the replay file as they choose the
    # model, so ``..``, absolute paths and symbolic links to regular files are allowed.
    (tmp_path / "shared").mkdir()
    (tmp_path / "specs").mkdir()
    replies = tmp_path / "shared" / "replies.json"
    replies.write_text(json.dumps([{"content": "hi"}]))
    (tmp_path / "specs" / "link.json").symlink_to(replies)
    specs = tmp_path / "specs" / "specs.toml"
    specs.write_text(
        '[agents.up]\nmodel = "scripted:../shared/replies.json"\n'
        '[agents.link]\nmodel = "scripted:link.json"\n'
        f"[agents.absolute]\nmodel = {json.dumps('scripted:' + str(replies))}\n"
    )
    loaded = load_specs(specs)
    assert [type(s.model) for s in loaded.specs] == [ReplayModel] * 3


@pytest.mark.usefixtures("no_hang")
def test_the_specs_file_must_be_a_small_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.toml")
    with open(tmp_path / "huge.toml", "wb") as f:
        f.truncate(1024 * 1024 + 1)
    for name, reason in [
        ("fifo.toml", "it is a FIFO, not a regular file"),
        ("huge.toml", "it is larger than the limit of 1048576 bytes"),
        (".", "it is a directory, not a regular file"),
    ]:
        with pytest.raises(SpecFileError) as info:
            load_specs(tmp_path / name)
        assert str(info.value) == f"{tmp_path / name}: cannot read the specs file: {reason}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a = " + "[" * 50_000, "invalid TOML: values are nested too deeply"),
        ("a = " + "{b = " * 50_000, "invalid TOML: values are nested too deeply"),
        ("a = 1" + "0" * 5000,
         "invalid TOML: Exceeds the limit (4300 digits) for integer string conversion: "
         "value has 5001 digits; use sys.set_int_max_str_digits() to increase the limit"),
        ("[agents.a]\ntimeout = 1" + "0" * 400,
         "agent 'a' field 'timeout': must be a positive number of seconds, not "
         "1" + "0" * 67 + "..." + "0" * 8),
    ],
)
def test_any_parse_failure_is_a_spec_file_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecFileError) as info:
        load(tmp_path, text)
    assert str(info.value) == f"{tmp_path / 'specs.toml'}: {message}"


def test_mappings_of_any_shape_give_spec_file_errors() -> None:
    cases: list[tuple[dict[Any, Any], str]] = [
        ({1: 2, "x": 3},
         "key 1: unknown; the top-level tables are pool, limits, defaults, agents, mcp"),
        ({"agents": {"a": {"model": "fake:x", "max_turns": -(10**5000)}}},
         "agent 'a' field 'max_turns': must be at least 1, not (an integer too long to show)"),
        ({"agents": {"a": {"model": "fake:x", "system_prompt": 10**5000}}},
         "agent 'a' field 'system_prompt': must be a string, not an integer "
         "((an integer too long to show))"),
        ({"agents": {"a": {"model": "fake:x", 2: 1, "z": 1}}},
         "agent 'a' field 2: unknown; the fields are agent_id, budget, critical, "
         "delegates_to, "
         "description, history_limit, hook_timeout, idle_timeout, limits, max_children, "
         "max_messages, max_parallel_tools, max_turns, model, output_retries, output_schema, "
         "retry, system_prompt, timeout, "
         "tool_timeout, tools"),
    ]
    for data, message in cases:
        with pytest.raises(SpecFileError) as info:
            specs_from_mapping(data, resolve_model=fake_resolver)
        assert str(info.value) == f"<mapping>: {message}"
