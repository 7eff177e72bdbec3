"""Usage's sum (issue 17): built by slot stores, without the validators, it is the
Usage the constructor builds from the same fields; a sum the constructor refuses (a
cost that overflows) is still refused."""

from __future__ import annotations

import copy
import math
import pickle

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import Usage


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    input_tokens = draw(st.integers(0, 10**12))
    read = draw(st.integers(0, input_tokens))
    write = draw(st.integers(0, input_tokens - read))
    return Usage(
        input_tokens, draw(st.integers(0, 10**12)),
        cache_read_tokens=read, cache_write_tokens=write,
        model=draw(st.sampled_from(["", "a", "b"])),
        cost=draw(st.one_of(st.none(), st.floats(0, 1e6))),
    )


def _by_constructor(a: Usage, b: Usage, total: Usage) -> Usage:
    return Usage(
        a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens,
        cache_read_tokens=a.cache_read_tokens + b.cache_read_tokens,
        cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
        model=total.model, cost=total.cost,
    )


@given(usages(), usages())
def test_a_sum_is_the_usage_the_constructor_builds(a: Usage, b: Usage) -> None:
    total = a + b
    built = _by_constructor(a, b, total)
    assert type(total) is Usage
    assert total == built and hash(total) == hash(built) and repr(total) == repr(built)
    assert attrs.asdict(total) == attrs.asdict(built)
    assert pickle.loads(pickle.dumps(total)) == built
    assert copy.copy(total) == built and copy.deepcopy(total) == built
    assert attrs.evolve(total) == built
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        total.input_tokens = 0  # type: ignore[misc]


def test_the_sums_model_and_cost() -> None:
    assert (Usage(1, 0, model="a", cost=0.5) + Usage(1, 0, model="a", cost=0.25)) == Usage(
        2, 0, model="a", cost=0.75
    )
    assert (Usage(1, 0, model="a", cost=0.5) + Usage(1, 0, model="b")).model == "(mixed)"
    assert (Usage(1, 0, model="a", cost=0.5) + Usage(1, 0, model="b")).cost is None
    assert Usage() + Usage(10, 5) == Usage(10, 5)


def test_a_sum_whose_cost_overflows_is_refused() -> None:
    big = Usage(1, 0, cost=1e308)
    with pytest.raises(ValueError) as info:
        big + big
    assert str(info.value) == "Usage.cost must be None or a finite non-negative number, not inf"
    assert math.isfinite((big + Usage(1, 0, cost=0.0)).cost or 0.0)
