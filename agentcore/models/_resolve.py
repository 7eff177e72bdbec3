"""Turning a model spec string (``openai:gpt-4o-mini``), or a list of them, into a
ChatModel."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._models import ChatModel
from ._fallback import FallbackModel
from ._replay import ReplayModel

#: The schemes :func:`resolve_model` knows.
SCHEMES = ("openai", "anthropic", "scripted")


def resolve_model(
    spec: str | Sequence[str], *, base_dir: str | Path | None = None
) -> ChatModel:
    """The model a spec string names; for a list of spec strings, a
    :class:`FallbackModel` of their models in that order (one string alone is just
    its model).

    ``openai:<model>`` is an :class:`OpenAIChatModel`, ``anthropic:<model>`` an
    :class:`AnthropicChatModel` (both configured from the environment; they need
    httpx, imported only then), ``scripted:<file>`` a :class:`ReplayModel` of a JSON
    replay file, relative to ``base_dir`` (default: the working directory). The
    model name may itself contain colons (``openai:llama3.1:8b``).

    Not a checkpoint; reads the replay file synchronously.

    Raises:
      ValueError: an unknown scheme, an empty name, an invalid replay file, or an
        empty list (a message naming the list's faulty entry by its index).
      ConfigurationError: the key in the environment cannot be sent (a control
        character in it, say); the message names the variable, never the key.
      ImportError: ``openai:`` or ``anthropic:`` without httpx installed.
    """
    if not isinstance(spec, str):
        return _fallback(spec, base_dir)
    scheme, colon, rest = spec.partition(":")
    if not colon or scheme not in SCHEMES:
        raise ValueError(
            f"Unknown model spec {spec!r}: expected one of "
            + ", ".join(f"'{s}:...'" for s in SCHEMES)
        )
    if not rest:
        raise ValueError(f"Model spec {spec!r} names no model after {scheme + ':'!r}")
    if scheme == "scripted":
        path = Path(rest)
        if base_dir is not None and not path.is_absolute():
            path = Path(base_dir) / path
        return ReplayModel.from_file(path)
    if scheme == "openai":
        from ._openai import OpenAIChatModel

        return OpenAIChatModel(rest)
    from ._anthropic import AnthropicChatModel

    return AnthropicChatModel(rest)


def _fallback(specs: Sequence[str], base_dir: str | Path | None) -> ChatModel:
    if not specs:
        raise ValueError("An empty list of model specs names no model")
    models = []
    for index, spec in enumerate(specs):
        if not isinstance(spec, str):
            raise ValueError(f"Model spec {index} of the list is not a string")
        try:
            models.append(resolve_model(spec, base_dir=base_dir))
        except ValueError as exc:
            raise ValueError(f"Model spec {index} of the list: {exc}") from None
    if len(models) == 1:
        return models[0]
    return FallbackModel(*models)
