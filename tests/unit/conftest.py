"""Unit tests run first (see pyproject's testpaths) and must never start a JVM."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pyspark import SparkContext

from sparkqueue import Broker
from sparkqueue.testing import FakeClock


@pytest.fixture(autouse=True)
def no_jvm():
    yield
    assert SparkContext._gateway is None, "a unit test started a JVM; it belongs in integration"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def near_wall_clock() -> FakeClock:
    """A FakeClock ten minutes behind the wall clock, as a broker's clock is near the store's:
    for tests that read a row's times against its commits' (a history's expiry)."""
    return FakeClock(datetime.now(UTC) - timedelta(minutes=10))


@pytest.fixture
def broker(tmp_path, clock) -> Broker:
    """A broker of the native engine alone: no Spark session, no JVM."""
    return Broker(None, str(tmp_path / "root"), clock=clock)
