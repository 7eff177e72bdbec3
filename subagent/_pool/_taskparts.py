"""Small parts of the Task handle: its read-only attributes and the view of its
resolution."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, overload

import attrs

T = TypeVar("T")


class _Task(Protocol):
    _resolved: bool

    async def _wait_resolved(self) -> None: ...


def _refuse(obj: object, value: object) -> None:
    raise attrs.exceptions.FrozenAttributeError()


class ReadOnly(property, Generic[T]):
    """A read-only attribute over the private field ``private``: reading gives the
    field, setting raises FrozenAttributeError.

    A property whose getter is an ``operator.attrgetter``: a read runs no Python
    frame (a descriptor with a Python ``__get__`` cost every read a call, about
    twenty reads per pool run).
    """

    def __init__(self, private: str) -> None:
        super().__init__(attrgetter(private), _refuse)

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type | None = None, /) -> ReadOnly[T]: ...

        @overload
        def __get__(self, obj: object, owner: type | None = None, /) -> T: ...

        def __get__(self, obj: object | None, owner: type | None = None, /) -> T | ReadOnly[T]:
            ...


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
