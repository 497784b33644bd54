"""A real Apache RocketMQ cluster with ``rmqproxy proxy`` in front of it, as a scenario server.

``ProxiedCluster`` starts a ``RunningProxy`` whose upstream is every name server of a running
``ApacheCluster`` (``namesrvAddr`` "a;b"): one of the session's shared clusters
(``apache_clusters`` in tests/conftest.py; tests/interop/apache_cluster.SHARED: two 4.9.7 brokers
broker-a and broker-b with two name servers, two 5.3.1 ones, two 4.9.7 ones with ACL, one 4.9.7
broker with quick transaction check-backs), which it leaves running. Each module has a proxy of
its own (they differ in configuration) and its own topic and group names. Clients are given only
the proxy's address (``namesrv``); ``restart()`` restarts the proxy (what a client sees as a
broker restart); ``cluster`` and ``proxy`` are the two parts, for the tests that kill a broker or
a name server, or read the proxy's logs.

A test that kills or stops a broker or a name server starts it again before it ends; when it
fails before, the next module to ask for the cluster finds it started again
(``SharedClusters.get``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.interop.apache_cluster import ApacheCluster
from tests.interop.server import RunningProxy

#: For the long scenarios whose proxy path does not depend on the client line: one line only, as
#: the suite's time is bounded (``program`` and ``oracle_line`` follow these fixtures' params).
ONLY_49 = pytest.mark.parametrize("scenario_line", ["4.9"], indirect=True, ids=["rocketmq-4.9.8"])
ONLY_5_ORACLE = pytest.mark.parametrize("oracle_line", ["5"], indirect=True, ids=["rocketmq-5.x"])


class ProxiedCluster:
    """A running Apache cluster behind a proxy of its own (context manager; ``close`` stops the
    proxy, not the cluster)."""

    def __init__(self, cluster: ApacheCluster, *, proxy_conf: dict[str, str] | None = None) -> None:
        self.cluster = cluster
        self.proxy = RunningProxy(self.cluster.namesrv_addr, proxy_conf=proxy_conf)
        # "apache..." first: the reference's known gaps (scenario_checks.reference_gap) are the
        # cluster's, and the proxy passes them through unchanged
        self.name = f"{self.cluster.name} via rmqproxy"

    @property
    def namesrv(self) -> str:
        return self.proxy.namesrv

    @property
    def broker_addr(self) -> str:
        return self.proxy.broker_addr

    def restart(self) -> None:
        self.proxy.restart()

    def stop(self) -> None:
        self.proxy.stop()

    def log_tail(self, chars: int = 4000) -> str:
        return f"--- proxy ---\n{self.proxy.log_tail(chars)}\n--- cluster ---\n{self.cluster.log_tail(chars)}"

    def close(self) -> None:
        self.proxy.close()

    def __enter__(self) -> ProxiedCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
