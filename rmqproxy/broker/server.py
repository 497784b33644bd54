"""``serve``'s composition root: builds the store, tables, services and processors on the shared
``runtime.Runtime``, wires them, and starts the listeners. Nothing else constructs these objects
(docs/architecture.md)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from twisted.internet import defer
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from codec import implementation as codec_implementation

from .acl import RELOAD_S as ACL_RELOAD_S
from .acl import AccessControl
from .brokerstats import BrokerStats
from .clients import ClientRegistry
from .clientstats import ClientStats
from ..core.clocks import Wall
from ..core.config import FLUSH_SYNC, Config
from .delay_delivery import DelayedDelivery
from ..net.dispatch import Dispatcher, Route
from ..net.fastport import listen_fast
from .kv import KVConfig
from .locktable import LockManager
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
from .processors.reply import ReplyProcessor
from .processors.send import SendProcessor
from .processors.sendback import SendBackProcessor, dead_letter_copy
from .processors.stats import StatsProcessor
from .processors.transaction import TransactionProcessor
from ..runtime import NO_HOOKS, Runtime
from .config_updates import RuntimeConfig
from .store import MessageStore, StoreConfig
from .subgroups import SubscriptionGroupTable
from .timer_messages import TimerService
from ..net.grpc_front import GrpcFront
from ..net.tls import TlsSettings, sniffing_factory
from .grpc.broker import GrpcBroker
from .pop import FSYNC_S as POP_FSYNC_S
from .pop import PopService
from .topics import TopicTable
from .transaction_service import OP_FLUSH_S, TransactionService, TransactionSettings
from ..net.transport import Connection

log = Logger()

DISK_CHECK_INTERVAL_S = 1.0  # how soon a full disk is noticed, and room again
IDLE_FILES_INTERVAL_S = 60.0  # a consume-queue file unused for one to two of these is closed


def _put_hooks(metrics_hook: Any, stats_hook: Any) -> Any:
    """One ``on_put`` feeding the metrics (unless disabled) and the broker statistics."""
    if metrics_hook is NO_HOOKS.on_put:
        return stats_hook

    def on_put(topic: str, messages: int, size: int, delayed: bool) -> None:
        metrics_hook(topic, messages, size, delayed)
        stats_hook(topic, messages, size, delayed)

    return on_put


class _Factory(Factory):
    """The remoting ports' client connections, each served by the dispatcher."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def buildProtocol(self, addr: Any) -> Connection:
        server = self.server
        return server.runtime.connection(server.dispatcher, server.connection_closed)


class Server:
    """``rmqproxy serve``: the name server and the broker on the embedded store."""

    def __init__(self, config: Config, reactor: Any, wall: Wall = time.time) -> None:
        self.config = config
        self.reactor = reactor  # its clock is monotonic (``core.clocks``): every relative wait
        self.wall = wall  # absolute times: store and born timestamps, timer and delay due times, pop visibility
        self.runtime = runtime = Runtime(config, reactor, node_id=config.broker_name, wall=wall)
        # the shared parts, by the names the processors and tests know them by
        self.registry, self.metrics, self.rejections = runtime.registry, runtime.metrics, runtime.rejections
        self.deadlines, self.holds, self.pull_log = runtime.deadlines, runtime.holds, runtime.pull_log
        self.reply_buffers, self.connections = runtime.reply_buffers, runtime.connections
        self._build_store()
        self._build_tables()
        self._build_services()
        self.access = AccessControl(config.acl_home) if config.acl_enable else None
        self.tls = TlsSettings.of(config)
        self.dispatcher = Dispatcher(self._routes(), clock=reactor, on_answer=runtime.hooks.on_request,
                                     on_reject=self.rejections, access=self.access)  # fmt: skip
        runtime.watch(locks=self.locks, clients=self.clients, lag=self.store.consumer_lag,
                      transactions=self.transactions, timers=self.timers, pops=self.pops)  # fmt: skip

    # --- building, in order -----------------------------------------------------------------

    def _build_store(self) -> None:
        """The store, and what wakes on its arrivals: held pulls, delay levels, timer messages."""
        config, reactor = self.config, self.reactor
        self.store = MessageStore(config.store_dir, StoreConfig.of(config), clock=self.wall,
                                  post=reactor.callFromThread, on_flush=self.runtime.hooks.on_flush)  # fmt: skip
        self.store.add_arrival_listener(self.holds.arrived)
        self.delayed = DelayedDelivery(self.store, self.wall, self.runtime.wall_alarm)
        self.store.add_arrival_listener(self.delayed.arrived)
        self.timers = TimerService(self.store, self.wall, self.runtime.wall_alarm)
        self.store.add_arrival_listener(self.timers.arrived)

    def _build_tables(self) -> None:
        """The broker's tables: topics, subscription groups, clients, permission, KV config."""
        config, conf_dir = self.config, self.config.store_dir / "config"
        self.topics = TopicTable(conf_dir / "topics.json", cluster=config.cluster_name, broker=config.broker_name,
                                 auto_create=config.auto_create_topic, default_queues=config.default_topic_queue_nums)  # fmt: skip
        self.groups = SubscriptionGroupTable(conf_dir / "subscriptionGroup.json", auto_create=config.auto_create_group,
                                             max_groups=config.max_subscription_groups,
                                             max_retry_queues=config.max_topic_queue_nums, clock=self.wall)  # fmt: skip
        self.clients = ClientRegistry()
        # brokerPermission: one object, switched by wipeWritePerm/addWritePerm, read by routes,
        # sends and pulls (UPDATE_BROKER_CONFIG refuses the key, pointing at those: config_updates.py)
        self.permission = BrokerPermission(conf_dir / "brokerPermission.json", config.broker_permission)
        self.kv = KVConfig(conf_dir / "kvConfig.json", lambda: self.config.kv_config_max_entries)

    def _build_services(self) -> None:
        """Transactions, statistics, queue locks and the consumers they notify."""
        config, reactor = self.config, self.reactor
        settings = TransactionSettings(config.transaction_timeout_ms, config.transaction_check_interval_ms,
                                       config.transaction_check_max)  # fmt: skip
        self.transactions = TransactionService(self.store, self.topics, self.clients, settings,
                                               self.store.config.store_host, self.wall)  # fmt: skip
        # the broker's own statistics (mqadmin statsAll, brokerStatus): kept whatever metricsExporterType says
        self.broker_stats = BrokerStats(cluster=config.cluster_name, wall=self.wall, store=self.store,
                                        max_keys=config.max_stats_keys)  # fmt: skip
        self.consumers = ConsumerProcessor(self.store, self.topics, self.clients, reactor, groups=self.groups)
        self.locks = LockManager(reactor, max_live_s=config.lock_max_live_ms / 1000,
                                 release_on_disconnect=config.lock_release_on_disconnect,
                                 on_free=self.consumers.notify_group, on_handoff=self.runtime.hooks.on_handoff)  # fmt: skip
        self.consumers.on_unregister = self.locks.client_unregistered
        self.client_stats = ClientStats(self.clients, self.metrics)
        self.runtime_config = RuntimeConfig(config, self.config_changed)
        self.pops = PopService(self.store, self.holds, self.wall, self.runtime.wall_alarm, config.store_dir / "pop",
                               max_in_flight=config.max_invisible_messages, sync=config.flush_disk_type == FLUSH_SYNC)  # fmt: skip
        self.pops.on_dlq = self._dead_letter
        self.store.add_arrival_listener(self.pops.arrived)
        self.grpc_front: GrpcFront | None = None
        self.grpc = GrpcBroker(config, self.store, self.topics, self.groups, self.clients, self.transactions, self.pops,
                               clock=reactor, wall=self.wall, permission=self.permission,
                               on_put=_put_hooks(self.runtime.hooks.on_put, self.broker_stats.on_put),
                               listeners=[self.pull_log, self.runtime.hooks.on_pull, self.broker_stats.on_pull],
                               grpc_port=lambda: self.grpc_front.bound_port if self.grpc_front else config.grpc_server_port)  # fmt: skip

    def _dead_letter(self, message: Any, topic: str) -> None:
        """Store a gRPC group's message in its dead-letter queue (past its attempts, or forwarded)."""
        self.topics.ensure(topic)
        self.store.put(dead_letter_copy(message, topic))

    def _routes(self) -> list[Route]:
        """Every request code ``serve`` answers, from each processor's ``routes()``."""
        config, hooks, store, topics, clients = self.config, self.runtime.hooks, self.store, self.topics, self.clients
        send = SendProcessor(config, store, topics, on_put=_put_hooks(hooks.on_put, self.broker_stats.on_put),
                             transactions=self.transactions, permission=self.permission, groups=self.groups)  # fmt: skip
        self.pulls = PullProcessor(config, store, topics, clients, self.holds, self.reactor,
                                   listeners=[self.pull_log, hooks.on_pull, self.broker_stats.on_pull],
                                   permission=self.permission, groups=self.groups, wall=self.wall,
                                   on_reject=self.rejections)  # fmt: skip
        processors = [
            NameServer(config, topics, self.permission, self.kv, groups=self.groups), send, self.pulls, self.consumers,
            SendBackProcessor(store, topics, on_send_back=self.broker_stats.on_send_back, permission=self.permission,
                              host=config.advertised_host, groups=self.groups),
            AdminProcessor(config, store, topics, clients, stats=self.broker_stats),
            LockProcessor(self.locks, topics, config.broker_name), TransactionProcessor(self.transactions, self.rejections),
            ReplyProcessor(config, store, clients, send), OperationsProcessor(config, store, topics, clients),
            StatsProcessor(config, store, topics, clients, self.broker_stats), CleanProcessor(store, topics),
            GroupProcessor(self.groups, store),
            ConfigProcessor(config, self.runtime_config, topics, str(config.store_dir / "config" / "kvConfig.json")),
        ]  # fmt: skip
        return [route for processor in processors for route in processor.routes()]

    # --- running ----------------------------------------------------------------------------

    def start(self) -> None:
        """Open the store, listen (the remoting ports, the fast port, /metrics) and start the periodic tasks."""
        config, runtime = self.config, self.runtime
        self.store.start()
        self._recover_topics()
        self.pops.start()
        factory = sniffing_factory(_Factory(self), self.tls, self.reactor)
        for port in (config.listen_port, config.broker_listen_port):
            if port:
                runtime.listen(port, factory)
        if config.fast_port:
            runtime.ports.append(listen_fast(runtime.open_port, config.fast_port, factory))
        if config.grpc_server_port:
            self._start_grpc()
        runtime.serve_metrics()
        self.delayed.start()
        self.timers.start()
        runtime.every(self._periodic())
        runtime.readiness.set_ready()
        if config.extra:
            log.warn("broker.conf keys rmqproxy does not use, ignored: {keys}", keys=", ".join(sorted(config.extra)))
        addresses = ", ".join(f"{p.getHost().host}:{p.getHost().port}" for p in runtime.ports)
        if self.grpc_front is not None:
            addresses += f", gRPC {config.bind_address}:{self.grpc_front.bound_port}"
        log.info(
            "rmqproxy listening on {addresses} (name server and broker; routes advertise {advertised}; fast port "
            "{fast}), store {store} ({flush}), codec {codec}",
            addresses=addresses, advertised=config.advertised_address, fast=config.fast_port or "off",
            store=config.store_dir, flush=config.flush_disk_type, codec=codec_implementation.describe(),
        )  # fmt: skip

    def _start_grpc(self) -> None:
        """The gRPC listener on its own thread (``net.grpc_front``), serving ``broker.grpc``."""
        from .grpc.service import add_service

        config = self.config
        front = GrpcFront(self.reactor, host=config.bind_address, port=config.grpc_server_port, tls=self.tls,
                          max_message_bytes=config.max_message_size + (1 << 20),
                          add_services=lambda server, f: add_service(
                              server, f, self.grpc, max_body_bytes=lambda: self.config.max_message_size,
                              max_wait_s=lambda: self.config.max_pull_suspend_ms / 1000, access=self.access,
                              rejections=self.rejections, on_rpc=self.runtime.hooks.on_grpc))  # fmt: skip
        front.start()
        self.grpc_front = front
        self.grpc.on_session_end = lambda session: self.metrics.forget_client(session.client_id)

    def _periodic(self) -> list[tuple[float, Any]]:
        """(interval in seconds, task) of everything ``serve`` does on a timer."""
        config = self.config
        periodic = [(600.0, self.store.delete_expired), (DISK_CHECK_INTERVAL_S, self.store.check_disk),
                    (IDLE_FILES_INTERVAL_S, self.store.release_idle_files),
                    (10.0, lambda: self.consumers.close_silent_clients(config.channel_expired_ms / 1000)),
                    (0.5, self.pull_log.flush), (config.transaction_check_interval_ms / 1000, self.transactions.check),
                    (OP_FLUSH_S, self.transactions.flush_ops), *self.broker_stats.periodic(),
                    (POP_FSYNC_S, self.pops.fsync), (1.0, self.pops.commit_offsets),
                    (5.0, lambda: self.pops.renew(self.grpc.online))]  # fmt: skip
        if self.access is not None:
            periodic.append((ACL_RELOAD_S, self.access.poll))
        if config.metrics_enabled:  # DISABLE measures nothing, clients' statistics included
            periodic.append((float(config.client_stats_interval_s), self.client_stats.poll))
        return periodic

    def config_changed(self, keys: set[str]) -> None:
        """Carry a runtime config change (``RuntimeConfig``) into the parts that copied a value at
        start; every other runtime key is read from ``self.config`` at each use."""
        c = self.config
        self.topics.set_template(c.auto_create_topic, c.default_topic_queue_nums)
        self.groups.auto_create = c.auto_create_group
        if c.broker_permission != self.permission.configured:
            self.permission.configure(c.broker_permission)
        self.holds.max_held, self.holds.max_held_per_conn = c.max_held_pulls, c.max_held_pulls_per_connection
        self.pops.max_in_flight = c.max_invisible_messages
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
        self.runtime.unfinished_frames.configure(c.max_unfinished_frame_bytes, c.frame_stall_timeout_ms / 1000)
        for conn in self.connections:  # new ones read it from the config as they are built
            conn.max_in_flight = c.max_in_flight_requests_per_connection
        self.runtime.reschedule(self.transactions.check, c.transaction_check_interval_ms / 1000)
        self.runtime.reschedule(self.client_stats.poll, float(c.client_stats_interval_s))

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
        """A client connection closed: forget its client's metrics, held pulls, locks and registrations."""
        client = self.clients.client_of(conn)
        if client is not None and client.client_id:
            self.metrics.forget_client(client.client_id)
        self.holds.connection_closed(conn)
        self.locks.connection_closed(conn)
        self.consumers.connection_closed(conn)

    def stop(self) -> defer.Deferred:
        """Answer held pulls and receives, let gRPC calls end (``GrpcFront.stop``), then stop
        listening, flush and close the store, and close client connections gracefully
        (``Runtime.stop``)."""
        steps = [self.delayed.stop, self.timers.stop, self.transactions.flush_ops, self.locks.close,
                 self.topics.close, self.groups.close, self.pops.close, self._close_store]  # fmt: skip
        self.runtime.readiness.drain()
        if self.grpc_front is None:
            return self.runtime.stop(steps)
        self.holds.shutdown()
        for client_id in list(self.grpc.sessions):
            self.grpc.end_session(client_id)
        return self.grpc_front.stop().addBoth(lambda _: self.runtime.stop(steps))

    def _close_store(self) -> None:
        self.store.shutdown()
        log.info("rmqproxy stopped; store flushed")
