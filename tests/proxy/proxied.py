"""A real Apache RocketMQ cluster with ``rmqproxy proxy`` in front of it, as a scenario server.

``ProxiedCluster`` starts an ``ApacheCluster`` (one name server, brokers broker-a and broker-b of
4.9.7, or of 5.3.1 with ``broker_5``) and a ``RunningProxy`` whose upstream is that name server.
Clients are given only the proxy's address (``namesrv``); ``restart()`` restarts the proxy (what
a client sees as a broker restart); ``cluster`` and ``proxy`` are the two parts, for the tests
that kill a broker or read the proxy's pull log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.interop.apache_cluster import ApacheCluster
from tests.interop.server import RunningProxy

#: For the long scenarios whose proxy path does not depend on the client line: one line only, as
#: the suite's time is bounded (``program`` and ``oracle_line`` follow these fixtures' params).
ONLY_49 = pytest.mark.parametrize("scenario_line", ["4.9"], indirect=True, ids=["rocketmq-4.9.8"])
ONLY_5_ORACLE = pytest.mark.parametrize("oracle_line", ["5"], indirect=True, ids=["rocketmq-5.x"])


class ProxiedCluster:
    """An Apache cluster behind one proxy (context manager; ``close`` stops both)."""

    def __init__(self, *, broker_5: bool = False, acl: Mapping[str, str] | None = None,
                 broker_conf: Mapping[str, str] | None = None, proxy_conf: dict[str, str] | None = None,
                 brokers: tuple[str, ...] = ("broker-a", "broker-b")) -> None:  # fmt: skip
        self.cluster = ApacheCluster(brokers, broker_5=broker_5, acl=acl, broker_conf=broker_conf)
        try:
            self.proxy = RunningProxy(self.cluster.namesrv, proxy_conf=proxy_conf)
        except BaseException:
            self.cluster.close()
            raise
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
        try:
            self.proxy.close()
        finally:
            self.cluster.close()

    def __enter__(self) -> ProxiedCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
