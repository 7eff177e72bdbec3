"""Typed tools: ``@tool`` makes an agentcore Tool from a typed Python function.

The tool's name is the function's, its description the docstring's, and its JSON
Schema is derived from the signature (see ``_schema``). A call's argument text is
decoded and validated in one step by msgspec; arguments that do not fit raise
:class:`ToolArgumentsError`, whose message names the field and what is wrong with
it (the loop turns it into an error result, so the model can retry). The return
value is sent as is when it is a ``str``, else as JSON.

A sync function runs in a worker thread that is *abandoned* when the call is
cancelled (the agent's ``tool_timeout``, a task's timeout, a cancel): the call ends
on time with an error result while the thread runs on. What an abandoned thread may
still do: everything the function does until it returns (its side effects happen;
its result is dropped); nothing stops it. The threads draw on their own limiter
(:data:`MAX_TOOL_THREADS` per trio run), so threads left running by abandoned calls
never hold up other thread work of the process (an audit sink's, say); once that
many are stuck, further sync calls wait for a thread within their own time limit.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, overload

import attrs
import msgspec
import trio

from .._errors import AgentCoreError, ConfigurationError
from ._arguments import MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH, ArgumentsError, load_arguments
from ._schema import (
    Parameter,
    arguments_type,
    parameters_schema,
    parse_docstring,
    signature_parameters,
)
from ._tools import Liveness

P = ParamSpec("P")
R = TypeVar("R")

#: At most this many sync typed-tool calls run their thread at once (per trio run);
#: more wait for one to finish, within their own time limits.
MAX_TOOL_THREADS = 16

#: An argument error's text before its path is cut to this many characters: it may
#: quote what the model sent (an unknown field's name, an invalid enum value).
MAX_QUOTED_CHARS = 200

_LIMITER: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("typed_tool_threads")
_ENCODER = msgspec.json.Encoder()


class ToolArgumentsError(AgentCoreError, ValueError):
    """A typed tool's call arguments do not fit its parameters.

    The message says what is wrong and where: ``Expected `int`, got `str` - at
    `$.count``` (``$`` is the arguments object), ``Object missing required field
    `path```, or that the text is not valid JSON.
    """


@attrs.frozen(eq=False, kw_only=True)
class TypedTool(Generic[P, R]):
    """An agentcore Tool made by :func:`tool` from a typed function (opaque).

    Calling it calls the function. ``execute`` decodes the argument text into the
    parameters and calls the function with them (a sync one in a worker thread).

    Attributes:
      name, description, parameters, read_only, idempotent, liveness: The Tool's
        attributes.
      fn: The function.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = attrs.field(repr=False)
    fn: Callable[P, R] = attrs.field(repr=False)
    read_only: bool = False
    idempotent: bool = attrs.field(default=False, repr=False)
    liveness: Liveness = Liveness.opaque
    _struct: type[msgspec.Struct] = attrs.field(repr=False, alias="struct")
    _params: tuple[Parameter, ...] = attrs.field(repr=False, alias="params")
    _decoder: msgspec.json.Decoder[Any] = attrs.field(repr=False, alias="decoder")

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function itself (no decoding, no thread)."""
        return self.fn(*args, **kwargs)

    def decode(self, arguments: str) -> tuple[list[Any], dict[str, Any]]:
        """The positional and keyword arguments of a call, from its JSON text. Not a checkpoint.

        Raises:
          ToolArgumentsError: the text is not a JSON object within the bounds of
            :func:`agentcore.load_arguments`, or does not fit the parameters.
        """
        return decode_arguments(self._decoder, self._params, arguments)

    async def execute(self, arguments: str) -> str:
        """Run one call: decode ``arguments``, call the function, encode its result.

        A checkpoint. Cancelling it returns at once; a sync function's thread is
        then abandoned (see the module docstring for what it may still do).

        Raises:
          ToolArgumentsError: the arguments do not fit (the message names the field).
          TypeError: the function returned a value with no JSON form.
          Exception: whatever the function raises.
        """
        args, kwargs = self.decode(arguments)
        fn: Callable[..., Any] = self.fn
        if _is_async(fn):
            result = await fn(*args, **kwargs)
        else:
            result = await trio.to_thread.run_sync(
                functools.partial(fn, *args, **kwargs),
                abandon_on_cancel=True,
                limiter=_limiter(),
            )
        return encode_result(self.name, result)


@attrs.frozen(eq=False, kw_only=True)
class SelfMonitoringTypedTool(TypedTool[P, R]):
    """A typed tool declared ``self_monitoring``: its function bounds its own calls.

    The loop does not time it; the function must return or raise in bounded time.
    """

    async def execute_monitored(self, arguments: str, fallback_timeout: float) -> str:
        """Run one call as :meth:`TypedTool.execute` does, untimed. A checkpoint.

        ``fallback_timeout`` is not applied: the function promised a bound of its own.
        """
        return await self.execute(arguments)


@overload
def tool(fn: Callable[P, R], /) -> TypedTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    liveness: Liveness = Liveness.opaque,
) -> Callable[[Callable[P, R]], TypedTool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    liveness: Liveness = Liveness.opaque,
) -> TypedTool[P, R] | Callable[[Callable[P, R]], TypedTool[P, R]]:
    """Make an agentcore Tool from a typed function (async or sync): a decorator.

    Use it bare (``@tool``) or with options (``@tool(read_only=True)``). The name is
    the function's, the description the docstring's text before its first section,
    and each parameter's description comes from ``Annotated[T, "text"]`` (or
    ``msgspec.Meta(description=...)``) or else from the docstring's ``Args:``
    section. Parameter types: ``str``, ``int``, ``float``, ``bool``, ``None``,
    ``Literal``, ``Enum``, unions and ``Optional``, ``list``, ``tuple``,
    ``dict[str, T]``, ``TypedDict``, dataclasses, attrs classes and msgspec
    Structs, nested; a parameter with a default is optional. Example::

        @tool(read_only=True)
        async def add(a: int, b: int) -> int:
            '''Add two integers.

            Args:
              a: The first addend.
              b: The second addend.
            '''
            return a + b

    Args:
      fn: The function (when used bare).
      name: The tool's name, instead of the function's.
      description: The tool's description, instead of the docstring's.
      read_only: Whether the tool is free of side effects (the ``read_only`` gate
        allows it; the loop may run it concurrently with other read-only calls).
      idempotent: Whether running a call twice has the effect of running it once:
        crash recovery runs a call interrupted by a crash again only then (or when
        the tool is read-only).
      liveness: ``Liveness.opaque`` (the agent's ``tool_timeout`` bounds a call) or
        ``Liveness.self_monitoring`` (the function bounds its own calls).

    Raises:
      ConfigurationError: the function has no description, a parameter without a
        type hint, ``*args``/``**kwargs``, a type msgspec does not support, or a
        docstring entry for a parameter it does not take.
    """

    def make(fn: Callable[P, R]) -> TypedTool[P, R]:
        return _make(fn, name, description, read_only, Liveness(liveness), idempotent)

    return make if fn is None else make(fn)


def _make(
    fn: Callable[P, R],
    name: str | None,
    description: str | None,
    read_only: bool,
    liveness: Liveness,
    idempotent: bool = False,
) -> TypedTool[P, R]:
    if not callable(fn):
        raise ConfigurationError(f"@tool decorates a function, not {type(fn).__name__}")
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if not tool_name:
        raise ConfigurationError("@tool: the function has no __name__; pass name=")
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise ConfigurationError(
            f"tool {tool_name!r}: a generator function cannot be a tool; return the result"
        )
    doc = parse_docstring(inspect.getdoc(fn))
    text = description if description is not None else doc.description
    if not text:
        raise ConfigurationError(
            f"tool {tool_name!r} has no description: give the function a docstring "
            "or pass description="
        )
    params = signature_parameters(fn, tool_name, doc.arguments)
    struct = arguments_type(tool_name, params)
    kind = SelfMonitoringTypedTool if liveness is Liveness.self_monitoring else TypedTool
    return kind(
        name=tool_name,
        description=text,
        parameters=parameters_schema(tool_name, struct, params),
        fn=fn,
        read_only=read_only,
        idempotent=idempotent,
        liveness=liveness,
        struct=struct,
        params=params,
        decoder=msgspec.json.Decoder(struct),
    )


def decode_arguments(
    decoder: msgspec.json.Decoder[Any], params: tuple[Parameter, ...], text: str
) -> tuple[list[Any], dict[str, Any]]:
    """Decode and validate ``text`` with ``decoder`` into call arguments. Not a checkpoint.

    Raises:
      ToolArgumentsError: see :meth:`TypedTool.decode`.
    """
    value = decode_checked(decoder, text)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.positional:
            args.append(getattr(value, p.name))
        else:
            kwargs[p.name] = getattr(value, p.name)
    return args, kwargs


def decode_checked(decoder: msgspec.json.Decoder[Any], text: str) -> Any:
    """Decode and validate ``text`` with ``decoder``, within agentcore's argument
    bounds. Not a checkpoint.

    Raises:
      ToolArgumentsError: the text is past a bound of :func:`agentcore.load_arguments`,
        is not JSON, or does not fit the decoder's type (the message names the path).
    """
    if not isinstance(text, str):
        raise ToolArgumentsError(f"arguments must be JSON text, not {type(text).__name__}")
    _check_bounds(text)
    try:
        return decoder.decode(text)
    except msgspec.ValidationError as exc:
        raise ToolArgumentsError(f"invalid arguments: {_located(str(exc))}") from None
    except msgspec.DecodeError as exc:
        raise ToolArgumentsError(f"invalid JSON arguments: {_quoted(str(exc))}") from None
    except UnicodeError:
        # A lone surrogate (from a "\ud800" escape decoded upstream) has no UTF-8 form.
        raise ToolArgumentsError(
            "invalid JSON arguments: the text holds a lone surrogate (not valid Unicode)"
        ) from None
    except RecursionError:
        # Past the pre-check only if the bound is above the interpreter's limit.
        raise ToolArgumentsError(
            f"arguments nested too deeply (more than {MAX_ARGUMENT_DEPTH} levels of "
            "arrays and objects)"
        ) from None


def _check_bounds(text: str) -> None:
    # msgspec's decoder recurses on nesting (a RecursionError near the interpreter's
    # limit): text that could nest past the bound, or is past the size bound, is
    # first checked by agentcore's bounded parser. Every level opens with "[" or
    # "{", so text with few of them needs no check (counting is one pass in C).
    if len(text) * 4 <= MAX_ARGUMENT_BYTES and (
        text.count("[") + text.count("{") <= MAX_ARGUMENT_DEPTH
    ):
        return
    try:
        load_arguments(text)
    except ArgumentsError as exc:
        raise ToolArgumentsError(str(exc)) from None
    except ValueError:
        pass  # not JSON: msgspec's decoder says where


def _quoted(message: str) -> str:
    if len(message) <= MAX_QUOTED_CHARS:
        return message
    return message[:MAX_QUOTED_CHARS] + "... (cut)"


def _located(message: str) -> str:
    # msgspec's message with any quoted value cut to MAX_QUOTED_CHARS (the path,
    # made of parameter and field names, is kept), and "$" named when it names
    # neither a path nor a field (a wrong type for the arguments object itself).
    what, sep, where = message.rpartition(" - at `")
    if not sep:
        what, where = message, ""
    what = _quoted(what)
    if sep:
        return f"{what} - at `{where}"
    if "field `" in what:
        return what
    return f"{what} - at `$`"


def encode_result(tool_name: str, result: Any) -> str:
    """``result`` as the call's result text: itself if a ``str``, else its JSON. Pure.

    Raises:
      TypeError: ``result`` has no JSON form.
    """
    if isinstance(result, str):
        return result
    try:
        return _ENCODER.encode(result).decode("utf-8")
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"tool {tool_name!r} returned {type(result).__name__}, which has no JSON form "
            f"({exc})"
        ) from None


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004  (an object with an async __call__)
    )


def _limiter() -> trio.CapacityLimiter:
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = trio.CapacityLimiter(MAX_TOOL_THREADS)
        _LIMITER.set(limiter)
        return limiter
