"""A reference Apache RocketMQ cluster: one 4.9.7 name server (or more), several broker masters and,
for some of them, a slave.

::

    with ApacheCluster(("broker-a", "broker-b"), namesrvs=2) as cluster:
        ...  # clients use cluster.namesrv (or all: cluster.namesrv_addr, "a;b");
        ...  # cluster.broker_addrs == {"broker-a": "127.0.0.1:P", ...}
        cluster.kill("broker-b")  # SIGKILL, as a crash would
        cluster.start_broker("broker-b")  # same port and store; back when the name servers list it
        cluster.kill_namesrv(0)  # SIGKILL of the first name server; the other still lists the brokers
        cluster.start_namesrv(0)  # same port; back when it lists every running broker

    with ApacheCluster(("broker-a",), slaves=("broker-a",), broker_conf={"slaveReadEnable": "true"}) as cluster:
        ...  # cluster.slave_addrs == {"broker-a": "127.0.0.1:S"}: brokerId 1 of broker-a

Each broker is a master (brokerId 0) of ``DefaultCluster`` (4.9.7, or the 5.3.1 broker with
``broker_5=True``, which registers with the 4.9.7 name server as ``ApacheBroker`` does), built from
the same pieces as ``apache_broker.ApacheBroker``.  Every broker registers with every name server
(``namesrvAddr`` "a;b"); with more than one name server it does so every 10 s rather than 30 s
(``registerNameServerPeriod``, the broker's least), so a name server started again lists the
brokers within 10 s.

A name in ``slaves`` also gets a slave: the same ``brokerName``, ``brokerId`` 1, ``brokerRole``
SLAVE, a port and store of its own, and ``haMasterAddress`` the master's HA port (its listen port
+ 1, which a 4.9.x broker always takes). ``broker_conf`` goes to masters and slaves alike: a slave
serves pulls only with ``slaveReadEnable=true``, and a master then answers them with
``suggestWhichBrokerId``. ``kill``, ``start_broker`` and ``broker_addrs`` are about the masters;
``start()``, ``alive()``, ``stop()`` and ``close()`` cover the slaves too. Layout of the working
directory::

    namesrv/        user.home of the (first) name server: namesrv.conf, namesrv.out, namesrv.log, home/
    namesrv-<i>/    the same for name server i (1, 2, ...) when there are several
    <broker name>/  user.home of that broker: broker.conf, broker.out, broker.log (4.9.x),
                    logs/rocketmqlogs/broker.log (5.x), store/, home/ (its ROCKETMQ_HOME)
    <broker name>-slave/  the same for its slave

Every broker has its own ``ROCKETMQ_HOME`` and ``user.home``: a 4.9.x broker logs where
``home/conf/logback_broker.xml`` says and a 5.x broker under ``user.home``, so shared ones would
mix their logs; and with ``acl`` each reads (and watches, and may rewrite through the admin
commands) its own ``home/conf/plain_acl.yml``.

A broker (or slave) is ready when it has printed its boot line and every running name server's
GET_BROKER_CLUSTER_INFO lists it, in ``DefaultCluster``, at its address under its broker id.  ``restart()``,
``stop()``, ``log_tail()``, ``close()``, ``namesrv`` (the first name server) and ``broker_addr``
(the first broker) let it stand where a ``server.ScenarioServer`` is expected.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from codec.bodies import ClusterInfo
from codec.codes import RequestCode

from .apache_broker import (
    BROKER_MAIN,
    CLUSTER_NAME,
    NAMESRV_BOOT_LINE,
    NAMESRV_MAIN,
    REFERENCE_5_VERSION,
    REFERENCE_VERSION,
    TEST_JVM,
    ReferenceJvm,
    broker_boot_line,
    broker_properties,
    make_home,
    namesrv_properties,
    plain_acl_yaml,
    reference_classpaths,
    tail_logs,
    write_properties,
)
from .server import SHORT_DELAY_LEVELS, ScratchServer, ServerError, free_port
from .wire import WireClient

__all__ = ["SHARED", "SHARED_ACL", "ApacheCluster", "SharedClusters", "cluster_info", "listed_masters", "listed_nodes"]

MASTER_ID = 0
SLAVE_ID = 1


def cluster_info(namesrv: str, timeout: float = 5.0) -> ClusterInfo:
    """The name server's GET_BROKER_CLUSTER_INFO (106) answer."""
    with WireClient(namesrv, timeout) as wire:
        answer = wire.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    if answer.code != 0:
        raise ServerError(f"GET_BROKER_CLUSTER_INFO answered {answer.code}: {answer.remark}")
    return ClusterInfo.from_json(answer.body)


def listed_nodes(info: ClusterInfo, cluster: str = CLUSTER_NAME) -> dict[tuple[str, int], str]:
    """(broker name, broker id) -> address, for every master and slave of ``cluster`` that ``info`` lists."""
    nodes = {}
    for name in info.cluster_addr_table.get(cluster, []):
        data = info.broker_addr_table.get(name)
        for broker_id, addr in (data.broker_addrs if data is not None else {}).items():
            nodes[(name, broker_id)] = addr
    return nodes


def listed_masters(info: ClusterInfo, cluster: str = CLUSTER_NAME) -> dict[str, str]:
    """Broker name -> master address, for the brokers of ``cluster`` that ``info`` lists with one."""
    return {name: addr for (name, broker_id), addr in listed_nodes(info, cluster).items() if broker_id == MASTER_ID}


class ApacheCluster(ScratchServer):
    """``namesrvs`` name servers, a master per name in ``brokers`` and a slave per name in ``slaves``
    (context manager)."""

    START_TIMEOUT = 90.0  # per JVM, to its boot line
    REGISTER_TIMEOUT = 30.0  # from the boot line to the name server listing the broker
    STOP_TIMEOUT = 60.0
    #: How often the brokers of a cluster with several name servers register with each (ms): a name
    #: server started again lists them within this (the broker's least; its default is 30 s).
    REGISTER_PERIOD_MS = 10_000

    def __init__(
        self,
        brokers: Sequence[str] = ("broker-a", "broker-b"),
        *,
        slaves: Sequence[str] = (),
        broker_5: bool = False,
        namesrvs: int = 1,
        broker_conf: Mapping[str, str] | None = None,
        acl: Mapping[str, str] | None = None,
        message_delay_level: str | None = SHORT_DELAY_LEVELS,
        workdir: Path | None = None,
        jvm: Mapping[str, list[str]] = TEST_JVM,
    ) -> None:
        brokers = list(brokers)
        if not brokers or len(set(brokers)) != len(brokers):
            raise ValueError(f"broker names must be given, each once: {brokers!r}")
        if not set(slaves) <= set(brokers) or len(set(slaves)) != len(slaves):
            raise ValueError(f"slaves must name brokers of the cluster, each once: {slaves!r}")
        if namesrvs < 1:
            raise ValueError(f"a cluster needs a name server: namesrvs={namesrvs!r}")
        if acl is not None:
            if not {"accessKey", "secretKey"} <= acl.keys():
                raise ValueError("acl wants {'accessKey': ..., 'secretKey': ...}")
            plain_acl_yaml(acl["accessKey"], acl["secretKey"])  # refuses keys the broker would refuse
        self.name = f"apache-cluster-{REFERENCE_5_VERSION if broker_5 else REFERENCE_VERSION}"
        self.broker_5 = broker_5
        self.acl = dict(acl) if acl is not None else None
        self.classpath, self.broker_classpath = reference_classpaths(broker_5)
        self.ports: dict[str, int] = {}  # broker name -> listen port
        self.slave_ports: dict[str, int] = {}  # broker name -> its slave's listen port
        self.namesrv_ports: list[int] = []
        self._namesrvs: list[ReferenceJvm] = []
        self._brokers: dict[str, ReferenceJvm] = {}
        self._slaves: dict[str, ReferenceJvm] = {}
        super().__init__(workdir, "rmq-reference-cluster-")
        self.startup_seconds = 0.0  # of the last start(): name servers, then every broker ready
        try:
            self._prepare(namesrvs, brokers, list(slaves), broker_conf, message_delay_level, jvm)
            self.start()
        except BaseException:
            self.close()
            raise

    def _prepare(
        self,
        namesrvs: int,
        brokers: list[str],
        slaves: list[str],
        broker_conf: Mapping[str, str] | None,
        message_delay_level: str | None,
        jvm: Mapping[str, list[str]],
    ) -> None:
        """The working directory's confs and homes, and a ``ReferenceJvm`` per process."""
        for i in range(namesrvs):
            port = free_port()
            while port in self.namesrv_ports:
                port = free_port()
            self.namesrv_ports.append(port)
            ns_dir = self.workdir / ("namesrv" if i == 0 else f"namesrv-{i}")
            self._namesrvs.append(ReferenceJvm(
                "namesrv", NAMESRV_MAIN, classpath=self.classpath, jvm=jvm["namesrv"],
                conf=write_properties(ns_dir / "namesrv.conf", namesrv_properties(port, ns_dir)),
                home=make_home(ns_dir / "home", {"namesrv": ns_dir / "namesrv.log"}),
                user_home=ns_dir, out_path=ns_dir / "namesrv.out", ready_line=NAMESRV_BOOT_LINE,
                log_path=ns_dir / "namesrv.log", start_timeout=self.START_TIMEOUT, stop_timeout=self.STOP_TIMEOUT,
            ))  # fmt: skip
        extra = {
            **({"registerNameServerPeriod": str(self.REGISTER_PERIOD_MS)} if namesrvs > 1 else {}),
            **({"aclEnable": "true"} if self.acl is not None else {}),
            **(broker_conf or {}),
        }
        for name in brokers:
            self.ports[name] = port = self._pick_broker_port()
            self._brokers[name] = self._broker_jvm(name, port, self.workdir / name, message_delay_level, extra, jvm)
        for name in slaves:
            self.slave_ports[name] = port = self._pick_broker_port()
            slave = {"brokerId": str(SLAVE_ID), "brokerRole": "SLAVE",
                     "haMasterAddress": f"127.0.0.1:{self.ports[name] + 1}"}  # fmt: skip
            self._slaves[name] = self._broker_jvm(name, port, self.workdir / f"{name}-slave", message_delay_level,
                                                  {**extra, **slave}, jvm)  # fmt: skip

    def _broker_jvm(self, name: str, port: int, bdir: Path, message_delay_level: str | None,
                    extra: Mapping[str, str], jvm: Mapping[str, list[str]]) -> ReferenceJvm:  # fmt: skip
        """A broker of ``name`` on ``port`` with its conf, home and store under ``bdir``."""
        conf = broker_properties(
            name=name, port=port, namesrv=self.namesrv_addr, store=bdir / "store",
            message_delay_level=message_delay_level, extra=extra,
        )  # fmt: skip
        return ReferenceJvm(
            "broker", BROKER_MAIN, classpath=self.broker_classpath, jvm=jvm["broker"],
            conf=write_properties(bdir / "broker.conf", conf),
            home=make_home(bdir / "home", {"broker": bdir / "broker.log"}, self.acl),
            user_home=bdir, out_path=bdir / "broker.out", ready_line=broker_boot_line(f"127.0.0.1:{port}"),
            log_path=bdir / "broker.log", start_timeout=self.START_TIMEOUT, stop_timeout=self.STOP_TIMEOUT,
        )  # fmt: skip

    def _pick_broker_port(self) -> int:
        """A port free with port - 2 and port + 1 (what a broker binds), clear of those already
        picked: they are all free now, but the name server and the other brokers bind theirs later."""
        picked = (*self.ports.values(), *self.slave_ports.values())
        taken = {*self.namesrv_ports} | {p + d for p in picked for d in (-2, 0, 1)}
        while True:
            port = free_port(also_free=(-2, 1))
            if not taken & {port - 2, port, port + 1}:
                return port

    # --- addresses ---------------------------------------------------------------------------

    @property
    def namesrv(self) -> str:
        """The first name server's address."""
        return self.namesrv_addrs[0]

    @property
    def namesrv_addrs(self) -> list[str]:
        """Each name server's address, the first first."""
        return [f"127.0.0.1:{port}" for port in self.namesrv_ports]

    @property
    def namesrv_addr(self) -> str:
        """Every name server, in Java's ``namesrvAddr`` syntax ("a;b"): what the brokers are given."""
        return ";".join(self.namesrv_addrs)

    @property
    def broker_names(self) -> list[str]:
        return list(self._brokers)

    @property
    def broker_addrs(self) -> dict[str, str]:
        return {name: f"127.0.0.1:{port}" for name, port in self.ports.items()}

    @property
    def slave_addrs(self) -> dict[str, str]:
        """Broker name -> its slave's address, for the brokers with one."""
        return {name: f"127.0.0.1:{port}" for name, port in self.slave_ports.items()}

    @property
    def nodes(self) -> list[tuple[str, int]]:
        """(broker name, broker id) of every master, then of every slave."""
        return [*((name, MASTER_ID) for name in self._brokers), *((name, SLAVE_ID) for name in self._slaves)]

    def node_addr(self, name: str, broker_id: int = MASTER_ID) -> str:
        """The address of broker ``name``'s master (``broker_id`` 0) or slave (1)."""
        return (self.broker_addrs if broker_id == MASTER_ID else self.slave_addrs)[name]

    @property
    def broker_addr(self) -> str:
        """The first broker's address (what a ``ScenarioServer`` offers)."""
        return self.broker_addrs[self.broker_names[0]]

    def broker_pid(self, name: str) -> int:
        return self._broker(name).pid

    # --- the name server's view --------------------------------------------------------------

    def cluster_info(self, namesrv: int = 0) -> ClusterInfo:
        """Name server ``namesrv``'s GET_BROKER_CLUSTER_INFO answer."""
        return cluster_info(self.namesrv_addrs[namesrv])

    def listed(self, namesrv: int = 0) -> dict[str, str]:
        """Broker name -> address of the masters name server ``namesrv`` lists in ``DefaultCluster``."""
        return listed_masters(self.cluster_info(namesrv))

    def wait_listed(self, name: str, *, present: bool = True, timeout: float | None = None,
                    namesrv: int | None = None, broker_id: int = MASTER_ID) -> None:  # fmt: skip
        """Until every running name server (or only ``namesrv``) lists ``name``'s master (or, with
        ``broker_id`` 1, slave) at its address (or, ``present=False``, no longer lists it: a broker's
        entry goes when its connection to the name server closes)."""
        addr = self.node_addr(name, broker_id)
        node = (name, broker_id)
        deadline = time.monotonic() + (self.REGISTER_TIMEOUT if timeout is None else timeout)
        seen: object = None
        while True:
            asked = [namesrv] if namesrv is not None else [i for i, jvm in enumerate(self._namesrvs) if jvm.alive()]
            try:
                views = {self.namesrv_addrs[i]: listed_nodes(self.cluster_info(i)) for i in asked}
                if all((nodes.get(node) == addr) == present for nodes in views.values()):
                    return
                seen = views
            except (OSError, AssertionError, ServerError) as e:  # name server starting, closing, or refusing
                seen = e
            if present and not self._node(name, broker_id).alive():
                raise ServerError(f"{name}/{broker_id} exited before the name servers listed it\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ServerError(
                    f"a name server {'does not list' if present else 'still lists'} {name}/{broker_id} at {addr} "
                    f"(they answer {seen!r})\n{self.log_tail()}"
                )
            time.sleep(0.1)

    # --- processes ---------------------------------------------------------------------------

    def _broker(self, name: str) -> ReferenceJvm:
        try:
            return self._brokers[name]
        except KeyError:
            raise KeyError(f"no broker {name!r} in this cluster ({', '.join(self._brokers)})") from None

    def _node(self, name: str, broker_id: int) -> ReferenceJvm:
        """The master (``broker_id`` 0) or slave (1) of ``name``."""
        if broker_id == MASTER_ID:
            return self._broker(name)
        try:
            return self._slaves[name]
        except KeyError:
            raise KeyError(f"broker {name!r} has no slave in this cluster ({', '.join(self._slaves)})") from None

    def _broker_jvms(self) -> list[ReferenceJvm]:
        """Every master's JVM, then every slave's."""
        return [*self._brokers.values(), *self._slaves.values()]

    def _ready(self, jvm: ReferenceJvm) -> None:
        try:
            jvm.wait_ready()
        except ServerError as e:
            raise ServerError(f"{e}\n{self.log_tail()}") from None

    def _start_brokers(self, nodes: Iterable[tuple[str, int]]) -> None:
        """Spawn them all (masters and slaves, by (name, broker id)), then wait for each (the JVMs
        boot side by side)."""
        jvms = [(node, self._node(*node)) for node in nodes]
        for _, jvm in jvms:
            jvm.spawn()
        try:
            for (name, broker_id), jvm in jvms:
                self._ready(jvm)
                self.wait_listed(name, broker_id=broker_id)
        except BaseException:
            for _, jvm in jvms:
                jvm.kill()
            raise

    def _namesrv(self, i: int) -> ReferenceJvm:
        if not 0 <= i < len(self._namesrvs):
            raise IndexError(f"no name server {i} in this cluster (it has {len(self._namesrvs)})")
        return self._namesrvs[i]

    def _start_namesrvs(self, indexes: list[int]) -> None:
        """Spawn them all, then wait for each to boot and, once it has, to list every running
        broker (a broker registers with each of its name servers every ``REGISTER_PERIOD_MS``)."""
        for i in indexes:
            self._namesrv(i).spawn()
        for i in indexes:
            self._ready(self._namesrv(i))
        for i in indexes:
            for name, broker_id in self.nodes:
                if self._node(name, broker_id).alive():
                    self.wait_listed(name, namesrv=i, broker_id=broker_id,
                                     timeout=self.REGISTER_TIMEOUT + self.REGISTER_PERIOD_MS / 1000)  # fmt: skip

    def start(self) -> None:
        """The name servers not running, then every broker (master or slave) not running."""
        began = time.monotonic()
        self._start_namesrvs([i for i, jvm in enumerate(self._namesrvs) if not jvm.alive()])
        self._start_brokers([node for node in self.nodes if not self._node(*node).alive()])
        self.startup_seconds = time.monotonic() - began

    def start_namesrv(self, i: int) -> None:
        """Start name server ``i`` again (same port); return once it lists every running broker."""
        if self._namesrv(i).alive():
            raise ServerError(f"name server {i} is already running")
        self._start_namesrvs([i])

    def kill_namesrv(self, i: int) -> None:
        """SIGKILL name server ``i`` only, as a crash would stop it (``start_namesrv`` brings it back)."""
        self._namesrv(i).kill()

    def start_broker(self, name: str) -> None:
        """Start ``name`` again (same port, conf and store); return once the name server lists it."""
        if self._broker(name).alive():
            raise ServerError(f"{name} is already running")
        self._start_brokers([(name, MASTER_ID)])

    def stop_broker(self, name: str) -> None:
        """SIGTERM ``name`` and wait for its exit (it unregisters from the name server first)."""
        self._broker(name).terminate()

    def kill(self, name: str) -> None:
        """SIGKILL ``name`` only, as a crash would stop it (``start_broker`` brings it back)."""
        self._broker(name).kill()

    def alive(self, name: str | None = None) -> bool:
        """Whether ``name``'s master (or every process: the name servers, all brokers and slaves) is running."""
        if name is not None:
            return self._broker(name).alive()
        return all(jvm.alive() for jvm in (*self._namesrvs, *self._broker_jvms()))

    def namesrv_pid(self, i: int) -> int:
        """Name server ``i``'s process id."""
        return self._namesrv(i).pid

    def namesrv_alive(self, i: int) -> bool:
        """Whether name server ``i`` is running."""
        return self._namesrv(i).alive()

    def stop(self) -> None:
        """SIGTERM every broker (side by side) and wait, then the name servers."""
        try:
            for jvm in self._broker_jvms():
                jvm.signal_stop()
            errors = []
            for jvm in self._broker_jvms():
                try:
                    jvm.wait_stopped()
                except ServerError as e:
                    errors.append(str(e))
            if errors:
                raise ServerError("; ".join(errors))
        finally:
            for jvm in self._namesrvs:
                jvm.signal_stop()
            for jvm in self._namesrvs:
                jvm.wait_stopped()

    def restart(self) -> None:
        """Every process stopped and started again, on the same ports and stores."""
        self.stop()
        self.start()

    def log_tail(self, chars: int = 4000) -> str:
        """The last ``chars`` of each process's output and log."""
        paths = []
        for jvm in (*self._namesrvs, *self._broker_jvms()):
            paths += jvm.log_paths
        return tail_logs(paths, chars, root=self.workdir)

    def _halt(self) -> None:
        """Kill every JVM (the stores are thrown away, so graceful shutdowns buy nothing)."""
        for jvm in (*self._broker_jvms(), *self._namesrvs):
            jvm.kill()

    def __repr__(self) -> str:
        slaves = f"slaves={self.slave_addrs!r}, " if self.slave_addrs else ""
        return (f"ApacheCluster(namesrv={self.namesrv_addr!r}, brokers={self.broker_addrs!r}, {slaves}"
                f"workdir={str(self.workdir)!r})")


#: The account of the shared ACL cluster's ``plain_acl.yml`` (tests/interop/test_apache_cluster.py
#: and tests/proxy/test_via_acl.py sign with it).
SHARED_ACL = {"accessKey": "rmqproxyAcl", "secretKey": "rmqproxyAclSecret"}

#: The clusters tests share, by label (tests/conftest.py: the ``apache_clusters`` fixture and the
#: ``apache_cluster`` mark): each starts when a test first asks for it and stops after the last
#: test marked ``apache_cluster(label)``; the tests of each run in a row.
SHARED: dict[str, dict] = {
    # two name servers (tests/proxy/test_via_faults.py kills the first under traffic)
    "4.9.7": {"namesrvs": 2},
    "5.3.1": {"broker_5": True},
    "4.9.7-acl": {"acl": SHARED_ACL},
    # one broker (the rebalance scenario counts its queues) with quick transaction check-backs
    # (tests/interop/test_transactions.TRANSACTION_CONF)
    "4.9.7-one-tx": {"brokers": ("broker-a",), "broker_conf": {"transactionTimeOut": "1000",
                                                               "transactionCheckInterval": "1000"}},
}  # fmt: skip


class SharedClusters:
    """The ``SHARED`` clusters of a test session, each started once (a start is 5-15 s of JVM
    boots) and handed to every test marked ``apache_cluster(label)``.

    ``get`` checks the cluster first: a test that killed a broker and failed before starting it
    again leaves it dead, so dead processes are started again (same ports and stores) and every
    broker must be listed by the name server. ``release_after(index)`` stops the clusters that no
    test after position ``index`` of the session needs.
    """

    def __init__(self, needs: Sequence[frozenset[str]]) -> None:
        """``needs[i]``: the labels the session's i-th test is marked with."""
        unknown = set().union(*needs) - SHARED.keys()
        if unknown:
            raise ValueError(f"apache_cluster marks name unknown clusters {sorted(unknown)} (known: {sorted(SHARED)})")
        self.needs = list(needs)
        self.last_use = {label: i for i, labels in enumerate(self.needs) for label in labels}
        self.running: dict[str, ApacheCluster] = {}

    def get(self, label: str, index: int) -> ApacheCluster:
        """The running cluster ``label`` for the session's ``index``-th test (which must be marked so)."""
        if label not in self.needs[index]:
            raise ValueError(f"test #{index} asks for the shared cluster {label!r} but is not marked "
                             f"@pytest.mark.apache_cluster({label!r}): the cluster may have been stopped")  # fmt: skip
        cluster = self.running.get(label)
        if cluster is not None:
            try:
                self._repair(cluster)
            except BaseException:
                del self.running[label]
                cluster.close()
                raise
            return cluster
        cluster = ApacheCluster(**SHARED[label])
        self.running[label] = cluster
        print(f"\nshared {cluster.name} ({label}) ready in {cluster.startup_seconds:.1f}s")
        return cluster

    @staticmethod
    def _repair(cluster: ApacheCluster) -> None:
        """Every process running and every broker (and slave) listed at its address by every name server."""
        if not cluster.alive():
            cluster.start()  # the name server and the brokers not running, on the same ports and stores
        for name, broker_id in cluster.nodes:  # a broker registers every 30 s
            cluster.wait_listed(name, broker_id=broker_id, timeout=cluster.REGISTER_TIMEOUT + 30)

    def release_after(self, index: int) -> None:
        for label in [lb for lb in self.running if self.last_use.get(lb, -1) <= index]:
            self.running.pop(label).close()

    def close(self) -> None:
        while self.running:
            self.running.popitem()[1].close()
