"""RunState, the one value holding a run's mutable state (issue 16): its transitions."""

from __future__ import annotations

from agentcore import EventKind, InboxMessage, Message
from agentcore._run._state import Phase, RunState


def steering(text: str, *, preempts: bool = True, follow_up: str | None = None) -> InboxMessage:
    return InboxMessage(
        Message("user", text), EventKind.steering_injected, follow_up, None, preempts
    )


def test_a_new_state_snapshots_its_conversation() -> None:
    messages = [Message("system", "s"), Message("user", "u")]
    state = RunState.begin(messages)
    assert state.messages is messages
    assert state.snapshot == tuple(messages)
    assert (state.phase, state.turn, state.summary) == (Phase.new, 0, None)


def test_the_inbox_counts_preempting_messages_and_reads_in_order() -> None:
    state = RunState.begin([Message("user", "u")])
    state.put(steering("a"))
    state.put(steering("b", preempts=False))
    state.put(steering("c"))
    assert state.preempting == 2
    read = state.read_inbox()
    assert [p.message.content for p in read] == ["a", "b", "c"]
    assert [m.content for m in state.messages] == ["u", "a", "b", "c"]
    assert (state.inbox, state.preempting) == ([], 0)
    assert state.read_inbox() == ()  # none waited: no list is created


def test_a_turn_snapshots_and_an_abort_rolls_back_to_it() -> None:
    state = RunState.begin([Message("user", "u")])
    state.begin_turn()
    state.messages.append(Message("assistant", "partial"))
    assert state.turn == 1
    state.roll_back()
    assert state.messages == [Message("user", "u")]


def test_closing_turns_unread_steering_into_follow_ups_once() -> None:
    state = RunState.begin([Message("user", "u")])
    state.follow_ups.append("queued")
    state.put(steering("a", follow_up="a"))
    state.put(steering("dropped"))
    state.close()
    state.close()
    assert state.phase is Phase.ended
    assert state.follow_ups == ["queued", "a"]
    assert (state.inbox, state.preempting) == ([], 0)
