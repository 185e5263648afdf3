"""Marks every test under tests/integration as `spark` (it needs a JVM): `pytest -m "not spark"`
runs the JVM-free unit tests alone, in seconds. Starts the Spark Connect checks early when the
run includes them (see tests/integration/test_connect.py).

The run takes two workers (pytest-xdist, `-n 2` in pyproject.toml). The first test group, which
the first worker takes first, holds the unit tests (so they run before any JVM in that process,
as the unit tests' own check requires), the browser tests last among them, and then the Connect
checks' test, which waits for the Connect run that worker starts at collection. Every
integration module is a group of its own (its module fixtures, one process), shared out between
the workers as they come free."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

INTEGRATION = Path(__file__).with_name("integration")
BROWSER_TESTS = "test_console_browser.py"
CONNECT_MODULE = "test_connect.py"
_CONNECT_RUN = pytest.StashKey[object]()
_CHROMIUM = pytest.StashKey[object]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(item.path).parents:
            item.add_marker(pytest.mark.spark)

    # Unit tests first (they are JVM-free and quick), the browser tests last among them:
    # Chromium's install, begun at collection, has the time before them.
    def order(item: pytest.Item) -> int:
        if INTEGRATION in Path(item.path).parents:
            return 3 if Path(item.path).name != CONNECT_MODULE else 2
        return 1 if Path(item.path).name == BROWSER_TESTS else 0

    items.sort(key=order)  # stable: each group keeps its order
    for item in items:
        path = Path(item.path)
        first = INTEGRATION not in path.parents or path.name == CONNECT_MODULE
        item.add_marker(pytest.mark.xdist_group("first" if first else path.stem))


def _first_worker() -> bool:
    """Whether this process runs the first group (the only one without xdist)."""
    return os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"


def pytest_collection_finish(session: pytest.Session) -> None:
    from tests.browser import ChromiumInstall
    from tests.integration.test_connect import CONNECT_TEST, ConnectRun

    if not _first_worker():  # both are for the first group's tests
        return
    if any(item.name == CONNECT_TEST for item in session.items):
        session.config.stash[_CONNECT_RUN] = ConnectRun()
    if any(Path(item.path).name == BROWSER_TESTS for item in session.items):
        session.config.stash[_CHROMIUM] = ChromiumInstall()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for key in (_CONNECT_RUN, _CHROMIUM):
        started = session.config.stash.get(key, None)
        if started is not None:
            started.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def connect_run(request: pytest.FixtureRequest):
    run = request.config.stash.get(_CONNECT_RUN, None)
    if run is None:
        pytest.fail("the Connect checks were not started at collection")
    return run


@pytest.fixture(scope="session")
def chromium(request: pytest.FixtureRequest) -> str:
    """Debian's Chromium, installed (in the background since collection) where it was missing."""
    from tests.browser import ChromiumInstall

    install = request.config.stash.get(_CHROMIUM, None) or ChromiumInstall()
    return install.path()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def s3():
    """An S3 API served by moto's server, for the native engine on object storage."""
    from tests.s3_server import s3_server

    with s3_server() as server:
        yield server
