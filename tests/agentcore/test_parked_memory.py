"""What a run parked in its model call holds (issue 17, W6: bytes per parked run).

Structural facts, not sizes: the frames on a parked run's stack, the objects it
creates only when needed and the ones it shares. ``bench._parked`` measures the
bytes; these tests keep the shape that gives them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import trio
import trio.testing

import agentcore
import subagent
from agentcore import Agent, Message, ModelRequest, ModelResponse
from agentcore._run._state import RunState
from subagent._pool import _lifecycle


class ParkingModel:
    """A model whose every call blocks until cancelled; it keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        await trio.sleep_forever()
        raise AssertionError("unreachable")


class StreamingParkingModel(ParkingModel):
    """A streaming model whose every streamed call blocks until cancelled."""

    async def stream(self, request: ModelRequest, on_delta: Any) -> ModelResponse:
        self.requests.append(request)
        await trio.sleep_forever()
        raise AssertionError("unreachable")


def _stack(coro: Any) -> Iterator[str]:
    # The qualified names of the coroutines (and generators) a task is parked in,
    # outermost first.
    while coro is not None:
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        if code is None:
            return
        yield code.co_qualname
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)


def _ours(coro: Any) -> list[str]:
    # The stack down to the model's call (trio's own frames below it left out).
    names = []
    for name in _stack(coro):
        names.append(name)
        if name in ("ParkingModel.complete", "StreamingParkingModel.stream"):
            break
    return names


def _lists(state: RunState) -> tuple[object, ...]:
    return (state._inbox, state._follow_ups, state._pending, state._children)


async def test_a_parked_run_is_its_run_frame_over_the_models_call() -> None:
    model = ParkingModel()
    run = Agent(model=model, system_prompt="sys").new_run("hi")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        (task,) = nursery.child_tasks
        # No _loop, no complete(): the turn loop and a plain model call are in run()
        # (a run without an owner is its own: run() awaits itself once, in its scope).
        assert _ours(task.coro) == ["Run.run", "Run.run", "ParkingModel.complete"]
        nursery.cancel_scope.cancel()


async def test_a_run_parked_in_a_streamed_call_is_its_run_frame_over_the_models() -> None:
    # A streamed call is awaited directly too: no complete(), no frame for on_delta.
    model = StreamingParkingModel()
    run = Agent(model=model, system_prompt="sys").new_run("hi")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        (task,) = nursery.child_tasks
        assert _ours(task.coro) == ["Run.run", "Run.run", "StreamingParkingModel.stream"]
        assert model.requests == [ModelRequest(run.state.snapshot)]
        nursery.cancel_scope.cancel()


async def test_a_parked_run_creates_none_of_its_state_lists() -> None:
    model = ParkingModel()
    run = Agent(model=model).new_run("hi")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        assert _lists(run.state) == (None, None, None, None)
        assert (run.state.has_inbox, run.state.unreported) == (False, False)
        nursery.cancel_scope.cancel()


async def test_the_lists_are_made_on_first_use_and_work_as_before() -> None:
    model = ParkingModel()
    run = Agent(model=model).new_run("hi")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        run.follow_up("later")
        run.steer("now")
        assert run.state.follow_ups == ["later"]
        assert run.state.steering == ["now"]
        assert (run.state.has_inbox, run.state.unreported) == (True, True)
        run.abort("done")
    # Unread steering came back as a follow-up; the state's lists are plain lists.
    assert run.state.follow_ups == ["later", "now"]
    assert (run.state.inbox, run.state.pending, run.state.children) == ([], [], [])


def test_a_state_stored_and_read_back_keeps_its_lists() -> None:
    state = RunState.begin([Message("user", "u")], run_id="r", input="u")
    assert state.read_inbox() == ()
    assert _lists(state) == (None, None, None, None)
    back = RunState.from_json(state.to_json())
    assert (back.inbox, back.follow_ups, back.pending, back.children) == ([], [], [], [])
    state.follow_ups.append("f")
    assert RunState.from_json(state.to_json()).follow_ups == ["f"]


async def test_the_runs_of_one_agent_share_its_system_message() -> None:
    agent = Agent(model=ParkingModel(), system_prompt="sys")
    first, second = agent.new_run("a"), agent.new_run("b")
    assert first.messages[0] is second.messages[0] is agent.system_message()
    assert first.messages[0] == Message("system", "sys")
    # A prompt changed after construction is what the next run gets.
    agent.system_prompt = "other"
    assert agent.new_run("c").messages[0] == Message("system", "other")
    assert Agent(model=ParkingModel()).system_message() is None


async def test_the_first_request_is_the_turns_snapshot_itself() -> None:
    model = ParkingModel()
    run = Agent(model=model, system_prompt="sys").new_run("hi")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        await trio.testing.wait_all_tasks_blocked()
        (request,) = model.requests
        assert request.messages is run.state.snapshot
        assert request.messages == (Message("system", "sys"), Message("user", "hi"))
        nursery.cancel_scope.cancel()


def test_a_run_keeps_its_input_path_and_id_once_in_its_state() -> None:
    run = Agent(model=ParkingModel()).new_run("hi", path=("p",), run_id="r-1")
    assert (run.input, run.path, run.run_id) == ("hi", ("p",), "r-1")
    assert (run.state.input, run.state.path, run.state.run_id) == ("hi", ("p",), "r-1")
    assert not {"input", "path", "run_id", "_observers"} & set(agentcore.Run.__slots__)
    try:
        run.input = "changed"  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("Run.input is writable")


def _find(task: trio.lowlevel.Task, name: str) -> trio.lowlevel.Task | None:
    if task.name == name:
        return task
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            found = _find(child, name)
            if found is not None:
                return found
    return None


async def test_a_parked_pool_task_is_its_runner_over_the_run() -> None:
    model = ParkingModel()
    async with subagent.open_pool(defaults=subagent.Defaults(model=model)) as pool:
        pool.register(subagent.Spec("parked"))
        await pool.submit("parked", "go")
        await trio.testing.wait_all_tasks_blocked()
        # Named by its path alone.
        root = trio.lowlevel.current_root_task()
        assert root is not None
        task = _find(root, "parked/0001")
        assert task is not None
        assert _ours(task.coro) == ["run_task", "Run.run", "ParkingModel.complete"]
        pool.cancel()


def test_the_runner_frame_stays_small() -> None:
    # Every parked task holds run_task's frame (twice: trio materialises its frame
    # object), so its slots are bytes of every parked run.
    code = _lifecycle.run_task.__code__
    assert code.co_nlocals + code.co_stacksize <= 15
    code = agentcore.Run.run.__code__
    assert code.co_nlocals + code.co_stacksize <= 23
