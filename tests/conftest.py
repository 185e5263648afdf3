"""Marks every test under tests/integration as `spark` (it needs a JVM): `pytest -m "not spark"`
runs the JVM-free unit tests alone, in seconds. Starts the Spark Connect checks early when the
run includes them (see tests/integration/test_connect.py).

The run takes two workers (pytest-xdist, `-n 2` in pyproject.toml). The first test group holds
the unit tests (so they run before any JVM in the worker that takes it, as the unit tests' own
check requires), the browser tests last among them, and then the Connect checks' test. The
worker that takes the group starts the Connect run and Chromium's install at its first test, so
they have the unit tests' time; which worker that is, xdist decides. Every integration module
is a group of its own (its module fixtures, one process), shared out between the workers as
they come free."""

from __future__ import annotations

from pathlib import Path

import pytest

INTEGRATION = Path(__file__).with_name("integration")
BROWSER_TESTS = "test_console_browser.py"
CONNECT_MODULE = "test_connect.py"
_CONNECT_RUN = pytest.StashKey[object]()
_CHROMIUM = pytest.StashKey[object]()
_FIRST_GROUP_SEEN = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fault-kinds",
        default=None,
        help="The store-fault kinds the fault matrices run (comma-separated, or 'all'; by"
        " default each matrix's DEFAULT_KINDS: tests/unit/test_store_faults.py's and"
        " tests/integration/test_spark_store_faults.py's).",
    )


@pytest.hookimpl(tryfirst=True)  # the groups are marked before xdist reads them
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


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_FIRST_GROUP_SEEN] = False


@pytest.hookimpl(optionalhook=True)  # an xdist hook: no error in a run without xdist
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """In a grouped run, xdist has put each test's group in its id. When it has not, the groups
    would be ignored without a word (and both workers would start the Connect run): stop."""
    config = node.config  # type: ignore[attr-defined]
    ungrouped = [each for each in ids if "@" not in each]
    if config.getoption("dist") == "loadgroup" and ungrouped:
        pytest.exit(
            f"pytest-xdist did not group {ungrouped[0]} and {len(ungrouped) - 1} more tests:"
            " check the pytest and pytest-xdist versions against pyproject.toml",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """At the first group's first test in this process: start what the group's last tests need."""
    from tests.browser import ChromiumInstall
    from tests.integration.test_connect import CONNECT_TEST, ConnectRun

    config = item.config
    group = item.get_closest_marker("xdist_group")
    if config.stash.get(_FIRST_GROUP_SEEN, True) or group is None or group.args != ("first",):
        return
    config.stash[_FIRST_GROUP_SEEN] = True
    items = item.session.items
    if any(each.name == CONNECT_TEST for each in items):
        config.stash[_CONNECT_RUN] = ConnectRun()
    if any(Path(each.path).name == BROWSER_TESTS for each in items):
        config.stash[_CHROMIUM] = ChromiumInstall()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for key in (_CONNECT_RUN, _CHROMIUM):
        started = session.config.stash.get(key, None)
        if started is not None:
            started.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def connect_run(request: pytest.FixtureRequest):
    run = request.config.stash.get(_CONNECT_RUN, None)
    if run is None:
        pytest.fail("the Connect checks were not started at the first group's first test")
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


@pytest.fixture(scope="session")
def azure():
    """An Azure Blob API served by Azurite, for the native engine on Azure."""
    from tests.azurite import azurite_server

    with azurite_server() as server:
        yield server
