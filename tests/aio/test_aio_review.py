"""Attacks on ``subagent.aio`` from the outside, as asyncio users would make them
(issue 37 review): pools opened and closed concurrently on one loop, cancellations
that land as a bridged call completes, and the guest run's end racing new calls."""

from __future__ import annotations

import asyncio

import subagent.aio as aio
from subagent import Defaults, Spec

from ._drivers import GateModel


def test_two_pools_opened_at_once_on_a_fresh_loop() -> None:
    async def one(i: int) -> int:
        async with aio.open_pool(defaults=Defaults(model=GateModel())) as pool:
            pool.register(Spec(name="w", description="works"))
            return i

    async def main() -> list[int]:
        return list(await asyncio.gather(one(1), one(2), one(3)))

    assert asyncio.run(main()) == [1, 2, 3]
    assert aio._host.current_host() is None


def test_a_pool_opened_while_the_last_one_closes() -> None:
    async def main() -> str:
        inside = asyncio.Event()
        hosts: list[aio._host.Host] = []

        async def leaver() -> None:
            async with aio.open_pool():
                hosts.append(aio._host.current_host())  # type: ignore[arg-type]
                inside.set()

        async def opener() -> str:
            await inside.wait()
            # Open once the leaver's block has left, as its guest run ends.
            while hosts[0].users:  # noqa: ASYNC110 (no event marks that moment)
                await asyncio.sleep(0)
            assert not hosts[0].ended
            async with aio.open_pool(defaults=Defaults(model=GateModel())) as pool:
                pool.register(Spec(name="w", description="works"))
                return "opened"

        _, opened = await asyncio.gather(leaver(), opener())
        return opened

    assert asyncio.run(main()) == "opened"
    assert aio._host.current_host() is None
