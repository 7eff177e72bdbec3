"""Small parts of the Task handle: its read-only attributes and the view of its
resolution."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar, overload

import attrs

T = TypeVar("T")


class _Task(Protocol):
    _resolved: bool

    async def _wait_resolved(self) -> None: ...


class ReadOnly(Generic[T]):
    """A read-only attribute over the private field of the same name with a leading
    underscore: reading gives the field, setting raises FrozenAttributeError."""

    __slots__ = ("private",)

    def __set_name__(self, owner: type, name: str) -> None:
        self.private = "_" + name

    @overload
    def __get__(self, obj: None, owner: type) -> ReadOnly[T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj: object | None, owner: type) -> T | ReadOnly[T]:
        if obj is None:
            return self
        value: T = getattr(obj, self.private)
        return value

    def __set__(self, obj: object, value: T) -> None:
        raise attrs.exceptions.FrozenAttributeError()


class Done:
    """A view of a task's resolution with a trio.Event's ``wait`` and ``is_set``."""

    __slots__ = ("task",)

    def __init__(self, task: _Task) -> None:
        self.task = task

    def is_set(self) -> bool:
        return self.task._resolved

    async def wait(self) -> None:
        """Until the task resolves. A checkpoint."""
        await self.task._wait_resolved()
