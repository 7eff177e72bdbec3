"""Typed output: a run that must end with a value of a given type.

An Agent with an ``output_type`` offers its runs one more tool, ``final_result``,
whose parameters are the output's schema: the type's fields when it is an object
type (a dataclass, attrs class, msgspec Struct or TypedDict), else ``{"result": T}``
(the tool's description says so). The rules the loop follows (:class:`OutputCheck`):

- A turn whose tool calls include ``final_result`` runs no other tool: the first
  ``final_result`` call is checked, every other call of that turn gets a
  ``skipped: ...`` error result (and a ``tool_skipped`` event) without running.
  Tools are for gathering; the answer comes in a turn of its own.
- A valid call ends the run (``stop``): ``RunResult.structured`` is the decoded
  value and the run's output text is its JSON.
- An invalid call gets an error result naming the problem (the same messages as a
  typed tool's arguments: ``Expected `int`, got `str` - at `$.line```), and so
  does a text answer (the model is told to call ``final_result``). Each is an
  invalid attempt; the attempt after ``output_retries`` of them ends the run
  ``error`` with :class:`OutputValidationError`.
- Every attempt, valid or not, is an ``output_validation`` event and audit entry
  (recorded before the value is accepted: audit fails closed).

``final_result`` is not a tool the gate or tool hooks see: it runs nothing, and its
attempts are audited as ``output_validation`` entries.
"""

from __future__ import annotations

import abc
import functools
import inspect
import json
import types
import typing
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import msgspec
import trio

from .._errors import ConfigurationError, OutputValidationError
from .._events import EventKind
from .._messages import Message, ToolCall, ToolSpec
from .._tools._schema import Parameter, arguments_type, parameters_schema
from .._tools._tools import ToolOutcome
from .._tools._typed import ToolArgumentsError, decode_checked
from ._toolcall import run_tools

if TYPE_CHECKING:
    from ._port import RunPort

#: The name of the tool a typed run answers with.
FINAL_RESULT = "final_result"

#: Invalid attempts a run may follow with another one, by default.
DEFAULT_OUTPUT_RETRIES = 2

#: The result of a turn's other tool calls when it calls ``final_result``.
SKIPPED_FOR_OUTPUT = "skipped: a turn that calls final_result runs no other tool"
#: The result of a turn's second and later ``final_result`` calls.
SKIPPED_SECOND = "skipped: only the first final_result call of a turn is checked"
#: The problem of a text answer when output is required.
TEXT_ANSWER = "the answer was text; give it by calling the final_result tool"
#: The user message after a text answer when output is required.
CALL_FINAL_RESULT = (
    "Your answer must be given by calling the final_result tool with the answer as its "
    "arguments, not as text. Call final_result now."
)
#: The result of a valid ``final_result`` call.
ACCEPTED = "ok: the final result was accepted"

_OBJECT_TYPES = (
    msgspec.inspect.StructType,
    msgspec.inspect.DataclassType,
    msgspec.inspect.TypedDictType,
)


class OutputSchema(abc.ABC):
    """What a run's output must be: the ``final_result`` tool's parameters and the
    check of a call's arguments. :class:`TypedOutput` is the one for a Python type;
    subclass it to check output another way (``subagent``'s JSON Schema output does).

    Attributes:
      parameters: The JSON Schema (an object schema) of ``final_result``'s arguments.
      wrapped: Whether the answer is the ``result`` field of the arguments (a type
        that is not an object) rather than the arguments themselves.
      name: What the answer is, for the tool's description (``Review``, ``list``).
    """

    parameters: Mapping[str, Any]
    wrapped: bool
    name: str

    @abc.abstractmethod
    def decode(self, arguments: str) -> Any:
        """The answer in a ``final_result`` call's argument text. Not a checkpoint;
        a run calls it (and :meth:`encode`) in a worker thread, so it must be safe to
        call from several threads at once.

        Raises:
          ToolArgumentsError: the arguments do not fit; the message names the field.
        """

    def encode(self, value: Any) -> str:
        """The answer's JSON text (the run's output). Pure.

        Raises:
          TypeError: the value has no JSON form.
        """
        try:
            return msgspec.json.encode(value).decode("utf-8")
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"the answer ({type(value).__name__}) has no JSON form ({exc})"
            ) from None

    @functools.cached_property
    def tool_spec(self) -> ToolSpec:
        """The ``final_result`` tool the model is offered (made once)."""
        text = (
            "Give your final answer with this tool; calling it with valid arguments ends "
            "your work. Call it alone (other tool calls in the same turn are not run)"
        )
        if self.wrapped:
            text += (
                f". The answer is a {self.name}, not an object: put it in the `result` "
                "field."
            )
        else:
            text += f". Its arguments are the answer (a {self.name})."
        return ToolSpec(FINAL_RESULT, text, self.parameters)


class TypedOutput(OutputSchema):
    """The output schema of a Python type that ``@tool`` supports as a parameter.

    Decoding and validation are msgspec's, in one step within agentcore's argument
    bounds. Unknown fields follow msgspec's rule for the type: refused by a Struct
    with ``forbid_unknown_fields``, ignored otherwise, and refused around a wrapped
    answer.

    Raises:
      ConfigurationError: msgspec does not support the type.
    """

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type
        self.name = type_name(output_type)
        try:
            info = msgspec.inspect.type_info(output_type)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"output_type {self.name}: unsupported type: {exc}") from None
        self.wrapped = not isinstance(info, _OBJECT_TYPES)
        if self.wrapped:
            params = (Parameter("result", output_type, inspect.Parameter.empty, False),)
            try:
                struct = arguments_type(FINAL_RESULT, params)
                self.parameters = parameters_schema(FINAL_RESULT, struct, params)
            except ConfigurationError as exc:
                reason = str(exc).removeprefix(f"tool {FINAL_RESULT!r}: ")
                raise ConfigurationError(f"output_type {self.name}: {reason}") from None
            self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(struct)
        else:
            self.parameters = _object_schema(self.name, output_type)
            self._decoder = msgspec.json.Decoder(output_type)

    def __repr__(self) -> str:
        return f"<agentcore.TypedOutput {self.name}>"

    def decode(self, arguments: str) -> Any:
        """See :meth:`OutputSchema.decode`."""
        value = decode_checked(self._decoder, arguments)
        return value.result if self.wrapped else value


def type_name(hint: Any) -> str:
    """A short name of a type for the model: ``list[Finding]``, ``int | None``. Pure."""
    origin = typing.get_origin(hint)
    if origin is not None:
        args = typing.get_args(hint)
        if origin is typing.Literal:
            return f"Literal[{', '.join(map(repr, args))}]"
        if origin is typing.Annotated:
            return type_name(args[0])
        if origin in (typing.Union, types.UnionType):
            return " | ".join(type_name(a) for a in args)
        return f"{type_name(origin)}[{', '.join(type_name(a) for a in args)}]"
    if hint is None or hint is type(None):
        return "None"
    if isinstance(hint, type):
        return hint.__name__
    return repr(hint)


def _object_schema(name: str, output_type: Any) -> dict[str, Any]:
    # The type's own object schema inline, the types it names under $defs (itself
    # too when it refers to itself).
    try:
        (root,), components = msgspec.json.schema_components(
            [output_type], ref_template="#/$defs/{name}"
        )
    except Exception as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise ConfigurationError(f"output_type {name}: unsupported type: {reason}") from None
    key = root["$ref"].rpartition("/")[2]
    body = components.pop(key)
    schema = {k: v for k, v in body.items() if k != "title"}
    ref = json.dumps(root["$ref"])
    if ref in json.dumps([body, components]):
        components[key] = body
    if components:
        schema["$defs"] = components
    return schema


def output_schema(output_type: Any) -> OutputSchema:
    """``output_type`` as an :class:`OutputSchema`: itself if it is one, else its
    :class:`TypedOutput`.

    Raises:
      ConfigurationError: msgspec does not support the type.
    """
    if isinstance(output_type, OutputSchema):
        return output_type
    return TypedOutput(output_type)


@attrs.define(eq=False)
class OutputCheck:
    """One run's typed output: its attempts so far and, once one is valid, its value.

    Used by the run's loop alone (see the module docstring for the rules).

    Attributes:
      schema: What the output must be.
      retries: Invalid attempts that may be followed by another.
      invalid: Invalid attempts so far.
      accepted: Whether a valid ``final_result`` call ended the run.
      value: The decoded answer, once accepted.
      text: Its JSON text, once accepted.
    """

    schema: OutputSchema
    retries: int
    invalid: int = 0
    accepted: bool = False
    value: Any = None
    text: str = ""

    async def answer(self, run: RunPort, message: Message) -> bool:
        """Handle the model's answer of a turn; True when it ended the run. A checkpoint.

        Raises:
          OutputValidationError: this was an invalid attempt past ``retries``.
          AuditError: an attempt could not be recorded (nothing is accepted).
        """
        calls = message.tool_calls
        if not calls:
            await self._attempt(run, None, TEXT_ANSWER)
            run.add_message(Message("user", CALL_FINAL_RESULT))
            self._check_left(TEXT_ANSWER)
            return False
        first = next((i for i, c in enumerate(calls) if c.name == FINAL_RESULT), None)
        if first is None:
            await run_tools(run, calls)
            return False
        return await self._final(run, calls, first)

    async def _final(self, run: RunPort, calls: Sequence[ToolCall], first: int) -> bool:
        call = calls[first]
        run.count_calls(len(calls))
        problem: str | None = None
        try:
            if len(call.arguments) > THREAD_ABOVE_CHARS:
                value, text = await trio.to_thread.run_sync(
                    _decode_encode, self.schema, call.arguments
                )
            else:
                value, text = _decode_encode(self.schema, call.arguments)
        except ToolArgumentsError as exc:
            problem = f"{FINAL_RESULT}: {exc}"
        except (TypeError, ValueError) as exc:  # a checker of another kind
            problem = f"{FINAL_RESULT}: {exc}"
        await self._attempt(run, call, problem)
        if problem is not None:
            run.count_outcome(ToolOutcome(problem, True))
        outcome = ACCEPTED if problem is None else problem
        run.add_messages(
            Message("tool", outcome, tool_call_id=c.id, is_error=problem is not None)
            if i == first
            else Message("tool", _skip_text(c), tool_call_id=c.id, is_error=True)
            for i, c in enumerate(calls)
        )
        for i, c in enumerate(calls):
            if i != first:
                await run.emit(EventKind.tool_skipped, call=c, text=_skip_text(c))
        if problem is not None:
            self._check_left(problem)
            return False
        self.accepted, self.value, self.text = True, value, text
        return True

    async def _attempt(self, run: RunPort, call: ToolCall | None, problem: str | None) -> None:
        # The attempt's audit entry (first: an attempt that cannot be recorded is not
        # accepted), then its event.
        await run.audit(
            "output_validation",
            tool=FINAL_RESULT,
            call_id=call.id if call is not None else None,
            arguments=call.arguments if call is not None else None,
            verdict="ok" if problem is None else "error",
            error=problem,
        )
        await run.emit(
            EventKind.output_validation,
            call=call,
            text="ok" if problem is None else problem,
            is_error=problem is not None,
        )
        if problem is not None:
            self.invalid += 1

    def _check_left(self, problem: str) -> None:
        if self.invalid > self.retries:
            raise OutputValidationError(
                f"no valid {FINAL_RESULT} after {self.invalid} invalid attempts "
                f"(output_retries={self.retries}); the last: {problem}"
            )


#: A ``final_result`` argument text longer than this is checked in a worker thread.
THREAD_ABOVE_CHARS = 16 * 1024


def _decode_encode(schema: OutputSchema, arguments: str) -> tuple[Any, str]:
    """An answer's value and JSON text; in a worker thread for an answer longer than
    :data:`THREAD_ABOVE_CHARS`.

    The answer is capped (``load_arguments``) and a schema's check is bounded
    (``subagent.JsonSchemaOutput`` counts its steps), but a bounded check of a 1 MiB
    answer can still take tenths of a second: run on the trio thread, it would stall
    every other task of the pool (heartbeats, other runs). A thread rather than
    cooperative checkpoints because the validators (``jsonschema``, ``msgspec``) are
    synchronous code we do not own and cannot yield from. Cancelling waits for the
    thread (``abandon_on_cancel`` stays False): the bound keeps that wait short, and no
    thread is left running after its run. A short answer is checked inline: a thread
    costs more than its check, and a thread in flight looks idle to trio's autojump
    clock (tests' virtual time would jump past deadlines while it runs).
    """
    value = schema.decode(arguments)
    return value, schema.encode(value)


def _skip_text(call: ToolCall) -> str:
    return SKIPPED_SECOND if call.name == FINAL_RESULT else SKIPPED_FOR_OUTPUT
