"""What model calls cost: :func:`price` of a :class:`~agentcore.Usage`, from the
caller's price table or from genai-prices' offline snapshot of providers' prices.

genai-prices is optional (``pip install 'subagent[prices]'``). Without it only a
caller's table prices anything, and every other model has no price (``None``): an
unknown model is never counted as free. Its snapshot takes about half a second to
load; :func:`load_prices` loads it in a worker thread, and the adapters await that
before their first price, so that no event loop freezes on it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs
import trio

from .._messages import ModelResponse, Usage

#: Prices are per this many tokens.
PER_MILLION = 1_000_000

#: The highest price taken, in dollars per million tokens (so that no cost overflows).
MAX_PRICE = 1_000_000.0

#: The most model ids whose genai-prices lookup is remembered (the ids a server
#: reports are its to choose).
_LOOKUPS = 512


def _price_value(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None and attribute.name.startswith("cache_"):
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_PRICE
    ):
        raise ValueError(
            f"ModelPrices.{attribute.name} must be a number of dollars per million tokens "
            f"from 0 to {MAX_PRICE:g}, not {value!r}"
        )


@attrs.frozen
class ModelPrices:
    """One model's prices, in US dollars per million tokens.

    Attributes:
      input: Per million input tokens neither read from nor written to a cache.
      output: Per million output tokens.
      cache_read: Per million input tokens read from the prompt cache; None charges
        them as ``input``.
      cache_write: Per million input tokens written to the prompt cache; None charges
        them as ``input``.

    Raises:
      ValueError: a price that is not a number from 0 to :data:`MAX_PRICE`.
    """

    input: float = attrs.field(validator=_price_value)
    output: float = attrs.field(validator=_price_value)
    cache_read: float | None = attrs.field(default=None, validator=_price_value)
    cache_write: float | None = attrs.field(default=None, validator=_price_value)

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs at these prices, in US dollars."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        return (
            uncached * self.input
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
            + usage.output_tokens * self.output
        ) / PER_MILLION


#: A caller's prices: model id (as the adapter is configured with it, or as the
#: server reports it) -> its prices. It wins over genai-prices.
PriceTable: TypeAlias = Mapping[str, ModelPrices]


def _genai() -> Any:
    # genai-prices with its snapshot loaded, or None when it is not installed.
    try:
        import genai_prices.data_snapshot as snapshots
    except ImportError:
        return None
    snapshots.get_snapshot()  # loads the bundled data (the slow part)
    return snapshots


@functools.cache
def _snapshot_module() -> Any:
    return _genai()


async def load_prices() -> bool:
    """Load genai-prices' snapshot in a worker thread, once; afterwards :func:`price`
    never blocks on it. Whether genai-prices is installed. A checkpoint."""
    if _snapshot_module.cache_info().currsize:
        await trio.lowlevel.checkpoint()
    else:
        await trio.to_thread.run_sync(_snapshot_module)
    return _snapshot_module() is not None


@functools.lru_cache(maxsize=_LOOKUPS)
def _genai_model(model: str) -> tuple[Any, Any] | None:
    # (provider, model info) of genai-prices for a model id, or None if it knows none.
    snapshots = _snapshot_module()
    if snapshots is None or not model:
        return None
    try:
        found: tuple[Any, Any] = snapshots.get_snapshot().find_provider_model(
            model, None, None, None
        )
    except LookupError:
        return None
    return found


def _genai_cost(usage: Usage, model: str) -> float | None:
    found = _genai_model(model)
    if found is None:
        return None
    from genai_prices import Usage as GenaiUsage

    provider, info = found
    tokens = GenaiUsage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    try:
        calculation = info.calc_price(tokens, provider)
    except (ValueError, ArithmeticError):  # counts its price rules cannot take
        return None
    return float(calculation.total_price)


def price(
    usage: Usage, table: PriceTable | None = None, *, model: str | None = None
) -> float | None:
    """What ``usage`` costs in US dollars, cache reads and writes at their own prices,
    or None when no price of its model is known.

    The model is ``model`` if given, else ``usage.model``. Its prices are
    ``table[model]`` when the table has them, else genai-prices' (which matches
    dated and aliased ids such as ``gpt-4o-mini-2024-07-18``) when it is installed,
    else unknown. Not a checkpoint: the first use of genai-prices loads its snapshot
    here unless :func:`load_prices` did so before (the adapters do).
    """
    name = usage.model if model is None else model
    if table is not None and name in table:
        return table[name].cost(usage)
    return _genai_cost(usage, name)


def has_price(model: str, table: PriceTable | None = None) -> bool:
    """Whether :func:`price` knows a price for ``model`` (in ``table`` or in
    genai-prices' snapshot): what a cost budget checks before it starts. Not a
    checkpoint (see :func:`price`)."""
    return (table is not None and model in table) or _genai_model(model) is not None


def priced(response: ModelResponse, configured: str, table: PriceTable | None) -> ModelResponse:
    """``response`` with its usage naming a model (the server's, else ``configured``)
    and its cost: the price of the server's model id, else of the configured one,
    the table's prices before genai-prices'. Not a checkpoint: the adapters await
    :func:`load_prices` before their request, so that it never blocks."""
    usage = response.usage
    model = usage.model or configured
    names = tuple(dict.fromkeys((model, configured)))
    cost: float | None = None
    if table:
        cost = next((table[name].cost(usage) for name in names if name in table), None)
    for name in names:
        if cost is not None:
            break
        cost = _genai_cost(usage, name)
    return attrs.evolve(response, usage=attrs.evolve(usage, model=model, cost=cost))
