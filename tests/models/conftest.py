"""Fixtures of the model adapter tests: a fake API server on 127.0.0.1."""

from __future__ import annotations

from functools import partial

import pytest
import trio

from tests.models._fakeapi import FakeAPI


@pytest.fixture
async def api(nursery: trio.Nursery) -> FakeAPI:
    """A fake API server running for the test's duration."""
    fake = FakeAPI()
    listeners = await nursery.start(partial(trio.serve_tcp, fake.handle, 0, host="127.0.0.1"))
    fake.port = listeners[0].socket.getsockname()[1]
    return fake
