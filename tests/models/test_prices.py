"""Prices (issue 22 item 2) and Usage's cache tokens and cost (issue 18 item 4):
:func:`price` from genai-prices' snapshot or a caller's table, :func:`has_price`,
and the rules of ``+``."""

from __future__ import annotations

import math
import sys
from decimal import Decimal

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Usage
from agentcore.models import ModelPrices, _prices, has_price, load_prices, price

# genai-prices' snapshot, dollars per million tokens: claude-sonnet-4-5 costs 3 input,
# 0.30 cache read, 3.75 cache write, 15 output (up to 200k input tokens).
SONNET = Usage(
    12_000, 800, cache_read_tokens=9_000, cache_write_tokens=2_000, model="claude-sonnet-4-5"
)
SONNET_COST = float(
    (1_000 * Decimal(3) + 9_000 * Decimal("0.3") + 2_000 * Decimal("3.75") + 800 * Decimal(15))
    / 1_000_000
)


def test_price_of_a_known_model_counts_cache_tokens_at_their_prices() -> None:
    assert price(SONNET) == SONNET_COST


def test_price_matches_dated_ids_and_takes_a_model_override() -> None:
    dated = attrs.evolve(SONNET, model="claude-sonnet-4-5-20250929")
    assert price(dated) == SONNET_COST
    assert price(attrs.evolve(SONNET, model=""), model="claude-sonnet-4-5") == SONNET_COST


def test_a_table_wins_over_genai_prices() -> None:
    table = {"claude-sonnet-4-5": ModelPrices(input=1, output=2, cache_read=0.25)}
    # No cache_write price: cache writes are charged as input.
    expected = (1_000 * 1 + 9_000 * 0.25 + 2_000 * 1 + 800 * 2) / 1_000_000
    assert price(SONNET, table) == expected
    assert price(SONNET, {"other": ModelPrices(1, 1)}) == SONNET_COST


@pytest.mark.parametrize("model", ["", "(mixed)", "no-such-model-anywhere", "gpt-unknown-9"])
def test_an_unknown_model_has_no_price(model: str) -> None:
    assert price(attrs.evolve(SONNET, model=model)) is None
    assert not has_price(model)


def test_has_price() -> None:
    assert has_price("gpt-4o-mini")
    assert has_price("claude-haiku-4-5-20251001")
    assert has_price("mine", {"mine": ModelPrices(0, 0)})
    assert not has_price("mine", {"other": ModelPrices(0, 0)})


@pytest.mark.parametrize("bad", [-1, math.inf, math.nan, 1e7, "1", True])
def test_model_prices_refuse_what_is_not_a_price(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        ModelPrices(input=bad, output=1)  # type: ignore[arg-type]
    assert str(info.value) == (
        "ModelPrices.input must be a number of dollars per million tokens from 0 to 1e+06, "
        f"not {bad!r}"
    )


# -- Usage ---------------------------------------------------------------------------


def test_usage_keeps_its_positional_form_and_defaults() -> None:
    assert Usage(input_tokens=0, output_tokens=0) == Usage()
    assert Usage(3, 4) == Usage(3, 4, cache_read_tokens=0, cache_write_tokens=0, model="",
                                cost=None)
    assert Usage(3, 4).total_tokens == 7


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"input_tokens": -1}, "Usage.input_tokens must be a non-negative int, not -1"),
        ({"output_tokens": 1.5}, "Usage.output_tokens must be a non-negative int, not 1.5"),
        ({"cache_read_tokens": True, "input_tokens": 5},
         "Usage.cache_read_tokens must be a non-negative int, not True"),
        ({"input_tokens": 5, "cache_read_tokens": 4, "cache_write_tokens": 2},
         "Usage's cache_read_tokens and cache_write_tokens are parts of its input_tokens, "
         "so cannot add up to more (4 + 2 > 5)"),
        ({"cost": -0.5}, "Usage.cost must be None or a finite non-negative number, not -0.5"),
        ({"cost": math.inf}, "Usage.cost must be None or a finite non-negative number, not inf"),
    ],
)
def test_usage_refuses_impossible_counts(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        Usage(**fields)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_sum_adds_tokens_cache_tokens_and_costs() -> None:
    a = Usage(100, 10, cache_read_tokens=50, model="a", cost=0.25)
    b = Usage(20, 2, cache_write_tokens=20, model="b", cost=0.5)
    assert a + b == Usage(
        120, 12, cache_read_tokens=50, cache_write_tokens=20, model="(mixed)", cost=0.75
    )


def test_an_unpriced_call_makes_the_sum_unpriced() -> None:
    priced = Usage(100, 10, model="a", cost=0.25)
    unpriced = Usage(1, 0, model="b")
    assert (priced + unpriced).cost is None
    assert (unpriced + priced).cost is None
    assert (priced + unpriced + priced).cost is None


def test_a_usage_without_tokens_adds_nothing() -> None:
    priced = Usage(100, 10, model="a", cost=0.25)
    assert Usage() + priced == priced + Usage() == priced
    assert priced + Usage(model="a") == priced
    assert (Usage(cost=0.0) + Usage(1, 1)).cost is None  # priced at zero, then unpriced


# -- properties of + -------------------------------------------------------------------

MODELS = st.sampled_from(["", "a", "b", "(mixed)"])


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    read = draw(st.integers(0, 10**6))
    write = draw(st.integers(0, 10**6))
    return Usage(
        read + write + draw(st.integers(0, 10**6)),
        draw(st.integers(0, 10**6)),
        cache_read_tokens=read,
        cache_write_tokens=write,
        model=draw(MODELS),
        # Small integer costs add exactly as floats; float rounding is not + 's rule.
        cost=draw(st.none() | st.integers(0, 10**6).map(float)),
    ) if draw(st.booleans()) else Usage(model=draw(MODELS), cost=draw(st.none() | st.just(0.0)))


@given(usages(), usages(), usages())
def test_sum_is_associative(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c)


@given(usages())
def test_the_empty_usage_is_the_identity(a: Usage) -> None:
    assert Usage() + a == a + Usage() == a


@pytest.mark.slow
@given(st.lists(usages(), max_size=6))
def test_a_sum_is_priced_exactly_when_each_part_with_tokens_is(parts: list[Usage]) -> None:
    total = sum(parts, Usage())
    unpriced = [p for p in parts if p.cost is None and p.total_tokens > 0]
    assert (total.cost is None) == (bool(unpriced) or all(p.cost is None for p in parts))
    assert total.input_tokens == sum(p.input_tokens for p in parts)
    assert total.cache_read_tokens == sum(p.cache_read_tokens for p in parts)
    assert total.cache_write_tokens == sum(p.cache_write_tokens for p in parts)
    if total.cost is not None:
        assert total.cost == sum(p.cost or 0.0 for p in parts)


# -- without genai-prices --------------------------------------------------------------


async def test_load_prices_says_whether_genai_prices_is_installed() -> None:
    assert await load_prices() is True


def test_without_genai_prices_only_a_table_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    # An import of a module that sys.modules maps to None raises ImportError, as when
    # the extra is not installed.
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    monkeypatch.setitem(sys.modules, "genai_prices.data_snapshot", None)
    _prices._snapshot_module.cache_clear()
    _prices._genai_model.cache_clear()
    try:
        assert price(SONNET) is None
        assert not has_price("claude-sonnet-4-5")
        table = {"claude-sonnet-4-5": ModelPrices(input=1, output=1)}
        assert price(SONNET, table) == (12_000 + 800) / 1_000_000
        assert has_price("claude-sonnet-4-5", table)
    finally:
        monkeypatch.undo()
        _prices._snapshot_module.cache_clear()
        _prices._genai_model.cache_clear()
        assert _prices._snapshot_module() is not None  # loaded again, for the next tests
