"""Shared test fixtures: where the recorded Java session lives, and the Apache clusters tests share."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from tests.needs import require_java_tools, skip_or_fail

if TYPE_CHECKING:
    from tests.interop.apache_cluster import ApacheCluster, SharedClusters

REPO = Path(__file__).resolve().parents[1]

# Property tests check what is encoded, not how fast: hypothesis's 200 ms per-example deadline
# only measures how loaded the machine is (the suite runs tests side by side on two cores).
settings.register_profile("rmqproxy", deadline=None)
settings.load_profile("rmqproxy")


def find_session_vectors() -> Path:
    """The recorded Java 4.9.7 session: ``$RMQ_SESSION_VECTORS``, else the one in ``tests/vectors/``.

    Missing everywhere, it fails under CI and skips elsewhere.
    """
    candidates = [
        os.environ.get("RMQ_SESSION_VECTORS", ""),
        str(REPO / "tests" / "vectors" / "java-4.9.7-session.jsonl"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    skip_or_fail(f"recorded session not found (set RMQ_SESSION_VECTORS): {candidates}")


# --- servers on the test harness (tests/server/harness.py) ------------------------------------------


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., tuple]]:
    """``servers(path, **overrides)``: a started server on the test harness (``harness.make_server``:
    real store under ``path``, ``task.Clock`` time), stopped at teardown unless the test stopped it
    (a test may stop one and start another on the same store)."""
    from tests.server.harness import make_server

    made = []

    def make(path: Path = tmp_path, **overrides: object) -> tuple:
        server, reactor = make_server(path, **overrides)
        made.append(server)
        return server, reactor

    yield make
    for server in made:
        if not server.runtime.stopped:
            server.stop()


@pytest.fixture
def broker(servers: Callable[..., tuple]) -> tuple:
    """(server, reactor): one server with the default configuration on ``tmp_path``; a module
    that needs other settings overrides this fixture with its own ``servers(...)`` call."""
    return servers()


# --- Apache clusters shared across test modules (tests/interop/apache_cluster.SHARED) --------------

_SHARED_CLUSTERS = pytest.StashKey["SharedClusters"]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "apache_cluster(*labels, param=None): the test uses these shared Apache clusters "
        "(tests/interop/apache_cluster.SHARED), or the one its parameter ``param`` names; each starts when first "
        "asked for and stops after the session's last test marked with its label",
    )


def _cluster_labels(item: pytest.Item) -> frozenset[str]:
    labels = set()
    for mark in item.iter_markers("apache_cluster"):
        labels.update(mark.args)
        if mark.kwargs.get("param") is not None:
            callspec = getattr(item, "callspec", None)
            if callspec is None or mark.kwargs["param"] not in callspec.params:
                raise pytest.UsageError(f"{item.nodeid}: apache_cluster(param={mark.kwargs['param']!r}), "
                                        "but the test has no such parameter")  # fmt: skip
            labels.add(callspec.params[mark.kwargs["param"]])
    return frozenset(labels)


_SPARK = Path(__file__).resolve().parent / "spark"


def _phase(item: pytest.Item) -> int:
    """0: unit tests, 1: tests that drive Java (marked ``interop``), 2: the Spark tests."""
    if _SPARK in Path(str(item.path)).resolve().parents:
        return 2
    return 1 if item.get_closest_marker("interop") else 0


@pytest.hookimpl(trylast=True)  # after pytest has grouped the tests by their session-scoped parameters
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of the shared Apache clusters run together, the tests of each cluster in a row,
    where the last of them was (all other tests keep their order).

    pytest orders tests by their client line (a session-scoped parameter), which spreads each
    module's tests over several runs between other modules' tests; and an idle cluster is not free
    (an idle 5.3.1 cluster takes 0.6 of a core, its brokers' TimerFlushService polling; a 4.9.7 one
    0.09), so one kept running from run to run would slow every test in between. In a row, each
    cluster starts once and runs only as long as its own tests.

    Before that, the tests that drive Java move after the other unit tests, and the Spark tests to
    the end (where they were): their Maven builds then run during the unit tests (prebuild.py)."""
    items.sort(key=_phase)
    labels = [_cluster_labels(item) for item in items]
    marked = [i for i, mine in enumerate(labels) if mine]
    if not marked:
        return
    first_use: dict[str, int] = {}
    for i in marked:
        for label in sorted(labels[i]):
            first_use.setdefault(label, i)
    block = sorted(marked, key=lambda i: (min(first_use[label] for label in labels[i]), i))
    rest = [item for item, mine in zip(items, labels) if not mine]
    before = marked[-1] + 1 - len(marked)  # the unmarked tests that ran before the last marked one
    items[:] = rest[:before] + [items[i] for i in block] + rest[before:]


@pytest.fixture(scope="session")
def apache_clusters(request: pytest.FixtureRequest) -> Iterator[Callable[[str], ApacheCluster]]:
    """``apache_clusters(label)``: the running shared cluster ``label``, for a test marked
    ``@pytest.mark.apache_cluster(label)`` (or in a module so marked). It starts when first asked
    for and stops after the session's last test so marked: once per session, where a cluster of
    the module's own would start for every module, and for each run of a module's tests."""
    from tests.interop.apache_cluster import SharedClusters

    session = request.session
    clusters = SharedClusters([_cluster_labels(item) for item in session.items])
    request.config.stash[_SHARED_CLUSTERS] = clusters

    def get(label: str) -> ApacheCluster:
        require_java_tools("the reference cluster")
        return clusters.get(label, _index(session.config.stash[_CURRENT]))

    try:
        yield get
    finally:
        del request.config.stash[_SHARED_CLUSTERS]
        clusters.close()


def pytest_collection_finish(session: pytest.Session) -> None:
    """When Java-driving tests will run, their Maven builds start now, in the background
    (tests/interop/prebuild.py)."""
    from tests.interop.maven import missing_tools

    if any(item.get_closest_marker("interop") for item in session.items) and not missing_tools():
        from tests.interop import prebuild

        prebuild.start()


_CURRENT = pytest.StashKey[pytest.Item]()
_ORDER = pytest.StashKey[dict[int, int]]()


def _index(item: pytest.Item) -> int:
    """The item's position in the session's run order."""
    stash = item.config.stash
    if _ORDER not in stash:
        stash[_ORDER] = {id(it): i for i, it in enumerate(item.session.items)}
    return stash[_ORDER][id(item)]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.config.stash[_CURRENT] = item


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    clusters = item.config.stash.get(_SHARED_CLUSTERS, None)
    if clusters is not None:
        clusters.release_after(_index(item))
