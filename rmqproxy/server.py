"""The composition root: builds the store, tables, services and processors, wires them, and
starts the listeners. Nothing else constructs these objects (docs/architecture.md)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry, disable_created_metrics
from twisted.internet import defer, task
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.web.server import Site

from .acl import RELOAD_S as ACL_RELOAD_S
from .acl import AccessControl
from .alarm import Deadlines, precise_alarm
from .brokerstats import BrokerStats
from .clients import ClientRegistry
from .clientstats import ClientStats
from .config import Config
from .delayed import DelayedDelivery
from .dispatch import Dispatcher
from .fastport import listen_fast
from .hold import HoldService
from .kvconfig import KVConfig
from .pulllog import PullLog
from .locks import LockManager
from .exposition import MetricsResource
from .metrics import LiveState, Metrics
from .permission import BrokerPermission
from .processors.admin import AdminProcessor
from .processors.clean import CleanProcessor
from .processors.config import ConfigProcessor
from .processors.consumer import ConsumerProcessor
from .processors.groups import GroupProcessor
from .processors.lock import LockProcessor
from .processors.namesrv import NameServer
from .processors.operations import OperationsProcessor
from .processors.pull import PullProcessor
from .processors.send import SendProcessor
from .processors.reply import ReplyProcessor
from .processors.sendback import SendBackProcessor
from .processors.stats import StatsProcessor
from .processors.transaction import TransactionProcessor
from .rejects import Rejections
from .runtime_config import RuntimeConfig
from .store import MessageStore
from .subgroups import SubscriptionGroupTable
from .timers import TimerService
from .tls import TlsSettings, sniffing_factory
from .topics import TopicTable
from .transactions import OP_FLUSH_S, TransactionService, TransactionSettings
from .transport import Connection, ReplyBuffers

log = Logger()

DISK_CHECK_INTERVAL_S = 1.0  # how soon a full disk is noticed, and room again
IDLE_FILES_INTERVAL_S = 60.0  # a consume-queue file unused for one to two of these is closed


def _ignore(*_args: Any) -> None:
    """A metric hook that measures nothing (metricsExporterType=DISABLE)."""


_NO_HOOKS = SimpleNamespace(on_flush=_ignore, on_put=_ignore, on_pull=_ignore, on_handoff=_ignore, on_request=_ignore)


def _put_hooks(metrics_hook: Any, stats_hook: Any) -> Any:
    """One ``on_put`` feeding the metrics (unless disabled) and the broker statistics."""
    if metrics_hook is _ignore:
        return stats_hook

    def on_put(topic: str, messages: int, size: int, delayed: bool) -> None:
        metrics_hook(topic, messages, size, delayed)
        stats_hook(topic, messages, size, delayed)

    return on_put


class _Factory(Factory):
    def __init__(self, server: Server) -> None:
        self.server = server

    def buildProtocol(self, addr: Any) -> Connection:
        conn = Connection(
            self.server.dispatcher,
            self.server.reactor,
            max_frame_bytes=self.server.config.max_frame_size,
            on_close=self.server.connection_closed,
            on_reject=self.server.rejections,
            max_in_flight=self.server.config.max_in_flight_requests_per_connection,
            buffers=self.server.reply_buffers,
            deadlines=self.server.deadlines,
        )
        self.server.connections.add(conn)
        return conn


class Server:
    def __init__(self, config: Config, reactor: Any) -> None:
        self.config = config
        self.reactor = reactor
        disable_created_metrics()  # RocketMQ and rocketmq-exporter export no *_created series
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry, cluster=config.cluster_name, node_id=config.broker_name)
        # metricsExporterType=DISABLE: the request paths call no metric hooks at all (what
        # ``bench/e2e.py --no-metrics`` compares against).
        hooks = self.metrics if config.metrics_enabled else _NO_HOOKS
        self.store = MessageStore(
            config.store_dir,
            config.store_config(),
            clock=reactor.seconds,
            post=reactor.callFromThread,
            on_flush=hooks.on_flush,
        )
        self.topics = TopicTable(
            config.store_dir / "config" / "topics.json",
            cluster=config.cluster_name,
            broker=config.broker_name,
            auto_create=config.auto_create_topic,
            default_queues=config.default_topic_queue_nums,
        )
        self.groups = SubscriptionGroupTable(
            config.store_dir / "config" / "subscriptionGroup.json",
            auto_create=config.auto_create_group,
            max_groups=config.max_subscription_groups,
            max_retry_queues=config.max_topic_queue_nums,
            clock=reactor.seconds,
        )
        self.clients = ClientRegistry()
        self.rejections = Rejections(reactor.seconds)
        # every deadline alarm, in sight of the connections (held pulls, timer messages)
        self.deadlines = Deadlines(reactor.seconds, lambda fire: precise_alarm(reactor, fire))
        self.holds = HoldService(reactor, config.max_held_pulls, config.max_held_pulls_per_connection,
                                 alarm=self.deadlines.alarm)  # fmt: skip
        self.store.add_arrival_listener(self.holds.arrived)
        self.delayed = DelayedDelivery(self.store, reactor)
        self.store.add_arrival_listener(self.delayed.arrived)
        self.timers = TimerService(self.store, reactor.seconds, self.deadlines.alarm)
        self.store.add_arrival_listener(self.timers.arrived)
        # brokerPermission: one object, switched by wipeWritePerm/addWritePerm, read by routes,
        # sends and pulls (UPDATE_BROKER_CONFIG refuses the key, pointing at those: runtime_config.py)
        self.permission = BrokerPermission(config.store_dir / "config" / "brokerPermission.json",
                                           config.broker_permission)  # fmt: skip
        kv_path = config.store_dir / "config" / "kvConfig.json"
        self.kv = KVConfig(kv_path, lambda: self.config.kv_config_max_entries)
        names = NameServer(config, self.topics, self.permission, self.kv, groups=self.groups)
        self.runtime_config = RuntimeConfig(config, self.config_changed)
        configuring = ConfigProcessor(config, self.runtime_config, self.topics, str(kv_path))
        self.transactions = TransactionService(
            self.store, self.topics, self.clients,
            TransactionSettings(config.transaction_timeout_ms, config.transaction_check_interval_ms,
                                config.transaction_check_max),
            config.store_config().store_host, reactor.seconds,
        )  # fmt: skip
        # the broker's own statistics (mqadmin statsAll, brokerStatus): kept whatever metricsExporterType says
        self.broker_stats = BrokerStats(cluster=config.cluster_name, clock=reactor, store=self.store,
                                        max_keys=config.max_stats_keys)
        send = SendProcessor(config, self.store, self.topics, on_put=_put_hooks(hooks.on_put, self.broker_stats.on_put),
                             transactions=self.transactions, permission=self.permission,
                             groups=self.groups)  # fmt: skip
        self.pull_log = PullLog(config.pull_log_dir, config.pull_log_mode)
        self.pulls = PullProcessor(
            config, self.store, self.topics, self.clients, self.holds, reactor,
            listeners=[self.pull_log, hooks.on_pull, self.broker_stats.on_pull], permission=self.permission,
            groups=self.groups,
        )  # fmt: skip
        self.consumers = ConsumerProcessor(self.store, self.topics, self.clients, reactor, groups=self.groups)
        self.locks = LockManager(
            reactor,
            max_live_s=config.lock_max_live_ms / 1000,
            release_on_disconnect=config.lock_release_on_disconnect,
            on_free=self.consumers.notify_group,
            on_handoff=hooks.on_handoff,
        )
        self.consumers.on_unregister = self.locks.client_unregistered
        locking = LockProcessor(self.locks, self.topics, config.broker_name)
        sendback = SendBackProcessor(self.store, self.topics, on_send_back=self.broker_stats.on_send_back,
                                     permission=self.permission, host=config.advertised_host,
                                     groups=self.groups)  # fmt: skip
        admin = AdminProcessor(config, self.store, self.topics, self.clients, stats=self.broker_stats)
        grouping = GroupProcessor(self.groups, self.store)
        operations = OperationsProcessor(config, self.store, self.topics, self.clients)
        stats = StatsProcessor(config, self.store, self.topics, self.clients, self.broker_stats)
        cleaning = CleanProcessor(self.store, self.topics)
        transacting = TransactionProcessor(self.transactions, self.rejections)
        replying = ReplyProcessor(config, self.store, self.clients, send)
        self.registry.register(
            LiveState(self.metrics, holds=self.holds, locks=self.locks, clients=self.clients, lag=self.store.consumer_lag,
                      pull_log=self.pull_log, rejections=self.rejections, transactions=self.transactions,
                      timers=self.timers)
        )
        self.client_stats = ClientStats(self.clients, self.metrics)
        self.access = AccessControl(config.acl_home) if config.acl_enable else None
        self.tls = TlsSettings.of(config)
        self.dispatcher = Dispatcher(
            [*names.routes(), *send.routes(), *self.pulls.routes(), *self.consumers.routes(), *sendback.routes(),
             *admin.routes(), *locking.routes(), *transacting.routes(),
             *replying.routes(), *operations.routes(), *stats.routes(), *cleaning.routes(), *grouping.routes(),
             *configuring.routes()],
            clock=reactor, on_answer=hooks.on_request, on_reject=self.rejections, access=self.access,
        )  # fmt: skip
        self.ports: list[IListeningPort] = []
        self.connections: set[Connection] = set()
        self.reply_buffers = ReplyBuffers(config.max_buffered_reply_bytes_per_connection, config.max_buffered_reply_bytes)
        self._all_closed: defer.Deferred | None = None
        self._loops: list[task.LoopingCall] = []
        self._loop_of: dict[Any, task.LoopingCall] = {}  # periodic function -> its loop

    def start(self) -> None:
        self.store.start()
        self._recover_topics()
        factory = sniffing_factory(_Factory(self), self.tls, self.reactor)
        ports = [self.config.listen_port]
        if self.config.broker_listen_port:
            ports.append(self.config.broker_listen_port)
        for port in ports:
            self.ports.append(self.reactor.listenTCP(
                port, factory, backlog=self.config.server_socket_backlog, interface=self.config.bind_address
            ))  # fmt: skip
        if self.config.fast_port:
            self.ports.append(listen_fast(self.reactor, self.config.fast_port, factory,
                                          backlog=self.config.server_socket_backlog, interface=self.config.bind_address))
        if self.config.metrics_port and self.config.metrics_enabled:
            # as a 5.x broker: metricsPromExporterHost, when blank the broker's own address
            host = self.config.metrics_host or self.config.bind_address
            self.ports.append(self.reactor.listenTCP(
                self.config.metrics_port, Site(MetricsResource(self.registry, self.reactor)), interface=host
            ))  # fmt: skip
        self.delayed.start()
        self.timers.start()
        periodic = [(600.0, self.store.delete_expired), (DISK_CHECK_INTERVAL_S, self.store.check_disk),
                    (IDLE_FILES_INTERVAL_S, self.store.release_idle_files),
                    (10.0, lambda: self.consumers.close_silent_clients(self.config.channel_expired_ms / 1000)),
                    (0.5, self.pull_log.flush),
                    (self.config.transaction_check_interval_ms / 1000, self.transactions.check),
                    (OP_FLUSH_S, self.transactions.flush_ops), *self.broker_stats.periodic()]  # fmt: skip
        if self.access is not None:
            periodic.append((ACL_RELOAD_S, self.access.poll))
        if self.config.metrics_enabled:  # DISABLE measures nothing, clients' statistics included
            periodic.append((float(self.config.client_stats_interval_s), self.client_stats.poll))
        for interval, fn in periodic:
            loop = task.LoopingCall(fn)
            loop.clock = self.reactor
            self._start_loop(loop, interval)
            self._loops.append(loop)
            self._loop_of[fn] = loop
        if self.config.extra:
            ignored = ", ".join(sorted(self.config.extra))
            log.warn("broker.conf keys rmqproxy does not use, ignored: {keys}", keys=ignored)
        addresses = ", ".join(f"{p.getHost().host}:{p.getHost().port}" for p in self.ports)
        log.info(
            "rmqproxy listening on {addresses} (name server and broker; routes advertise {advertised}; fast port "
            "{fast}), store {store} ({flush})",
            addresses=addresses, advertised=self.config.advertised_address, fast=self.config.fast_port or "off",
            store=self.config.store_dir, flush=self.config.flush_disk_type,
        )  # fmt: skip

    @staticmethod
    def _start_loop(loop: task.LoopingCall, interval: float) -> None:
        loop.start(interval, now=False).addErrback(lambda f: log.failure("periodic task failed", f))

    def config_changed(self, keys: set[str]) -> None:
        """Carry a runtime config change (``RuntimeConfig``) into the parts that copied a value at
        start; every other runtime key is read from ``self.config`` at each use."""
        c = self.config
        self.topics.set_template(c.auto_create_topic, c.default_topic_queue_nums)
        self.groups.auto_create = c.auto_create_group
        if c.broker_permission != self.permission.configured:
            self.permission.configure(c.broker_permission)
        self.holds.max_held, self.holds.max_held_per_conn = c.max_held_pulls, c.max_held_pulls_per_connection
        self.locks.max_live_s, self.locks.release_on_disconnect = c.lock_max_live_ms / 1000, c.lock_release_on_disconnect
        self.store.config = dataclasses.replace(
            self.store.config, max_message_size=c.max_message_size, file_reserved_time_hours=c.file_reserved_time_hours,
            disk_max_used_space_ratio=c.disk_max_used_space_ratio,
        )  # fmt: skip
        self.transactions.settings = dataclasses.replace(
            self.transactions.settings, timeout_ms=c.transaction_timeout_ms, check_max=c.transaction_check_max
        )
        self.reply_buffers.per_connection = c.max_buffered_reply_bytes_per_connection
        self.reply_buffers.limit = c.max_buffered_reply_bytes
        for conn in self.connections:  # new ones read it from the config as they are built
            conn.max_in_flight = c.max_in_flight_requests_per_connection
        for fn, interval in ((self.transactions.check, c.transaction_check_interval_ms / 1000),
                             (self.client_stats.poll, float(c.client_stats_interval_s))):  # fmt: skip
            loop = self._loop_of.get(fn)
            if loop is not None and loop.running and loop.interval != interval:
                loop.stop()  # the next run comes one new interval from now
                self._start_loop(loop, interval)

    def _recover_topics(self) -> None:
        """Give every topic the store has queues for a config, should topics.json lack it: its
        writer runs a moment after a topic is created, so a crash in between would otherwise leave
        acknowledged messages of an auto-created topic unroutable."""
        queue_counts: dict[str, int] = {}
        for topic, queue_id in self.store.queues():
            queue_counts[topic] = max(queue_counts.get(topic, 0), queue_id + 1)
        for topic, count in queue_counts.items():
            if self.topics.get(topic) is None:
                try:
                    self.topics.ensure(topic, count)
                except ValueError as exc:
                    log.warn("not recovering topic {topic!r} of the store: {error}", topic=topic, error=exc)
                    continue
                log.warn("topic {topic} had queues in the store but no config: recovered with {count} queues",
                         topic=topic, count=count)  # fmt: skip

    def connection_closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if not self.connections and self._all_closed is not None and not self._all_closed.called:
            self._all_closed.callback(None)
        client = self.clients.client_of(conn)
        if client is not None and client.client_id:
            self.metrics.forget_client(client.client_id)
        self.holds.connection_closed(conn)
        self.locks.connection_closed(conn)
        self.consumers.connection_closed(conn)

    def stop(self) -> defer.Deferred:
        """Stop listening, answer held pulls, flush and close the store, and close client
        connections gracefully; the Deferred fires once they are gone (at most 2 s), so the
        reactor lets queued answers reach the clients before it exits. A Java 4.9 client does
        not fail requests pending on a closed connection: unanswered held pulls would make it
        wait out its 30 s pull timeout after a restart."""
        for loop in self._loops:
            if loop.running:
                loop.stop()
        for port in self.ports:
            port.stopListening()
        for step in (self.delayed.stop, self.timers.stop, self.transactions.flush_ops, self.holds.shutdown, self.pull_log.close, self.locks.close,
                     self.topics.close, self.groups.close):
            try:
                step()
            except Exception:  # whatever fails, the store below is still flushed and closed
                log.failure("stopping: {step} failed", step=step.__qualname__)
        self.store.shutdown()
        log.info("rmqproxy stopped; store flushed")
        self._all_closed = defer.Deferred()
        if not self.connections:
            self._all_closed.callback(None)
        for conn in list(self.connections):
            conn.close()
        all_closed = self._all_closed

        def give_up() -> None:
            if not all_closed.called:
                all_closed.callback(None)

        timeout = self.reactor.callLater(2.0, give_up)
        return all_closed.addBoth(lambda _: timeout.cancel() if timeout.active() else None)
