"""Marks every test under tests/integration as `spark` (it needs a JVM): `pytest -m "not spark"`
runs the JVM-free unit tests alone, in seconds. Starts the Spark Connect checks early when the
run includes them (see tests/integration/test_connect.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

INTEGRATION = Path(__file__).with_name("integration")
_CONNECT_RUN = pytest.StashKey[object]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(item.path).parents:
            item.add_marker(pytest.mark.spark)


def pytest_collection_finish(session: pytest.Session) -> None:
    from tests.integration.test_connect import CONNECT_TEST, ConnectRun

    if any(item.name == CONNECT_TEST for item in session.items):
        session.config.stash[_CONNECT_RUN] = ConnectRun()


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = session.config.stash.get(_CONNECT_RUN, None)
    if run is not None:
        run.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def connect_run(request: pytest.FixtureRequest):
    run = request.config.stash.get(_CONNECT_RUN, None)
    if run is None:
        pytest.fail("the Connect checks were not started at collection")
    return run


@pytest.fixture(scope="session")
def s3():
    """An S3 API served by moto's server, for the native engine on object storage."""
    from tests.s3_server import s3_server

    with s3_server() as server:
        yield server
