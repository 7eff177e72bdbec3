"""Reading what a reply says about its own cost: token counts, cache tokens and the
model id the server reports, for both adapters. Sans-IO; raises :class:`Malformed`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._messages import Usage
from ._limits import cut
from ._payload import Malformed, field

#: The most characters of a server-reported model id kept in ``Usage.model`` (the id
#: is the server's to choose, and it is copied into every event of the call).
MODEL_CHARS = 200

#: The largest token count believed from one reply (a thousand times any context
#: window): a larger one would overflow the price arithmetic.
MAX_TOKENS = 10**12

#: Anthropic's input counts: the uncached input, cache writes and cache reads are
#: reported apart; our ``input_tokens`` is their sum.
ANTHROPIC_INPUTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def tokens(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    """The token count ``obj[key]``, None when missing or null; :class:`Malformed`
    naming ``where.key`` when it is not an integer from 0 to :data:`MAX_TOKENS`."""
    if obj.get(key) is None:
        return None
    value = field(obj, key, int, where)
    if value < 0:
        raise Malformed(f"{where}.{key} is negative")
    if value > MAX_TOKENS:
        raise Malformed(f"{where}.{key} is over {MAX_TOKENS}")
    return value


def reported_model(obj: Mapping[str, Any], where: str) -> str:
    """The model id ``obj["model"]`` names ("" when none), cut to
    :data:`MODEL_CHARS`."""
    return cut(field(obj, "model", str, where, ""), MODEL_CHARS)


def openai_usage(body: Mapping[str, Any], where: str) -> Usage:
    """The usage of a chat-completions response (or chunk) ``body``: ``prompt_tokens``
    (cached ones included), ``completion_tokens`` and
    ``prompt_tokens_details.cached_tokens``, with the model ``body`` names."""
    usage = field(body, "usage", dict, where, {})
    prompt = tokens(usage, "prompt_tokens", "usage") or 0
    details = field(usage, "prompt_tokens_details", dict, "usage", {})
    cached = tokens(details, "cached_tokens", "usage.prompt_tokens_details") or 0
    return Usage(
        prompt,
        tokens(usage, "completion_tokens", "usage") or 0,
        # Cached tokens are part of prompt_tokens: a server claiming more is believed
        # only up to prompt_tokens (which prices them higher, never lower).
        cache_read_tokens=min(cached, prompt),
        model=reported_model(body, where),
    )


def anthropic_counts(usage: Mapping[str, Any], where: str) -> dict[str, int]:
    """The counts a messages-API ``usage`` object reports (the keys of
    :data:`ANTHROPIC_INPUTS` and ``output_tokens``), missing ones left out."""
    counts = {}
    for key in (*ANTHROPIC_INPUTS, "output_tokens"):
        value = tokens(usage, key, where)
        if value is not None:
            counts[key] = value
    return counts


def anthropic_usage(counts: Mapping[str, int], model: str) -> Usage:
    """The Usage of :func:`anthropic_counts`' ``counts``: the input counts summed,
    cache reads and writes apart."""
    return Usage(
        sum(counts.get(key, 0) for key in ANTHROPIC_INPUTS),
        counts.get("output_tokens", 0),
        cache_read_tokens=counts.get("cache_read_input_tokens", 0),
        cache_write_tokens=counts.get("cache_creation_input_tokens", 0),
        model=model,
    )
