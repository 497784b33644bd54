"""What gRPC clients ask of the broker, done on the reactor thread: routes and assignments,
client sessions (Telemetry settings, heartbeats, termination), sends with the 5.x type check,
transactions and their check-back, and pop-style receives, acks and invisibility
(``rmqproxy.broker.pop``). Arguments are plain values the gRPC thread decoded and checked
(``convert``); results are plain values it encodes. Refusals raise ``convert.Refused``.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from codec.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData, build_subscription
from codec.codes import RequestCode
from codec.command import RemotingCommand
from codec.headers import EndTransactionRequestHeader
from codec.message import HostPort, Message, decode_message

from ...core.clocks import Wall
from ...core.config import Config
from ...core.delay_levels import parse_levels
from ...core.hold import WAKE_NONE
from ...net.rejects import OVER_FAIR_SHARE
from ...observe.pull_events import PullEvent
from ..clients import ClientInfo, ClientRegistry
from ..permission import BrokerPermission
from ..pop import (ANY_QUEUE, ConnectionFull, GaveWay, InvisibleFull, PopService, ReceiptRefused, Receive, Received,
                   connection_key)
from ..processors.send import when_stored
from ..sql92 import SelectorError, SqlFilter
from ..store import MessageStore, PutResult, PutStatus, TagFilter
from ..subgroups import SubscriptionGroupTable
from ..timer_messages import TimerRefused, TimerService, timer_delivery
from ..topics import TopicConfig, TopicTable
from ..transaction_service import (TRANSACTION_COMMIT, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK, TransactionService,
                                   to_half)  # fmt: skip
from .convert import Code, Outgoing, Refused, message_type_of

log = Logger()

#: Client types of the wire (``pb.ClientType``) by number, as sessions keep them.
PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER, PULL_CONSUMER = 1, 2, 3, 4
#: What every consumer is told (a 5.x Proxy's ``grpcClientConsumerLongPollingBatchSize`` and max long poll).
RECEIVE_BATCH = 32
LONG_POLLING_S = 20.0
#: How many transactions' offsets EndTransaction can find (sends and check-backs), newest kept.
MAX_TRANSACTIONS = 100_000


@dataclasses.dataclass
class ClientSettings:
    """What a client's Telemetry settings said, decoded."""

    client_type: int
    group: str = ""
    topics: tuple[str, ...] = ()
    subscriptions: tuple[tuple[str, int, str], ...] = ()  # (topic, filter type, expression)
    request_timeout_s: float = 3.0
    long_polling_s: float | None = None


@dataclasses.dataclass
class SettingsReply:
    """What the server tells a client in return (``publishing``/``subscription`` and backoff)."""

    max_body_bytes: int
    fifo: bool = False
    max_attempts: int = 17
    retry_delays_s: tuple[float, ...] = ()


class Session:
    """One gRPC client (one client id) while its Telemetry stream is open: registered with the
    client registry as its "connection", so consumer listings show it and transaction
    check-backs reach it (``send_oneway`` turns CHECK_TRANSACTION_STATE into a Telemetry command)."""

    def __init__(self, owner: GrpcBroker, client_id: str, remote: str, push: Callable[[Any], None]) -> None:
        self.owner = owner
        self.client_id = client_id
        self.remote = remote
        self.push = push
        self.settings: ClientSettings | None = None
        self.connected = True
        self.number = 0
        host, _, port = remote.rpartition(":")
        self.born_host = HostPort(host or "0.0.0.0", int(port) if port.isdigit() else 0)

    def send_oneway(self, command: RemotingCommand) -> None:
        """A command the broker sends on its own: a transaction check-back goes down the
        Telemetry stream (``("recover", message, transaction id)``); others mean nothing to a
        5.x client and are not sent."""
        if command.code != RequestCode.CHECK_TRANSACTION_STATE or not self.connected:
            return
        ext = command.ext_fields or {}
        message = decode_message(command.body)[0]
        transaction_id = ext.get("transactionId") or message.msg_id
        self.owner.remember_transaction(transaction_id, message.properties.get("PGROUP", ""),
                                        int(ext.get("tranStateTableOffset", "0")), int(ext.get("commitLogOffset", "0")))  # fmt: skip
        self.push(("recover", message, transaction_id))

    def close(self) -> None:
        """End the session (a silent client, or the server stopping)."""
        self.owner.end_session(self.client_id)

    def __repr__(self) -> str:
        return f"<gRPC client {self.client_id} at {self.remote}>"


@dataclasses.dataclass
class SendOutcome:
    """One message's send result: its status and, when stored, its ids and queue offset."""

    code: int
    message: str
    message_id: str = ""
    transaction_id: str = ""
    offset: int = 0


def java_hash(text: str) -> int:
    """Java ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def consistent_hash(value: int, buckets: int) -> int:
    """Guava ``Hashing.consistentHash`` (how a 5.x Proxy picks a message group's queue)."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        nxt = int((candidate + 1) / (((state >> 33) + 1) / float(1 << 31)))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


class GrpcBroker:
    """The reactor side of ``serve``'s gRPC front end (see the module docstring)."""

    def __init__(self, config: Config, store: MessageStore, topics: TopicTable, groups: SubscriptionGroupTable,
                 clients: ClientRegistry, transactions: TransactionService, pops: PopService, *, clock: Any, wall: Wall,
                 permission: BrokerPermission, on_put: Callable[[str, int, int, bool], None] | None = None,
                 listeners: list[Callable[[PullEvent], None]] | None = None, grpc_port: Callable[[], int]) -> None:  # fmt: skip
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.clients = clients
        self.transactions = transactions
        self.pops = pops
        self.clock = clock  # the reactor's (monotonic): receive waits and their durations
        self.wall = wall  # born times, timer due times, the event log's timestamps
        self.permission = permission
        self.on_put = on_put
        self.listeners = listeners if listeners is not None else []
        self.grpc_port = grpc_port
        self.sessions: dict[str, Session] = {}
        self._transactions: collections.OrderedDict[str, tuple[str, int, int]] = collections.OrderedDict()
        self._round_robin = itertools.count()
        self._numbers = itertools.count(1)
        self._waiting: dict[int, defer.Deferred] = {}  # token -> a receive the pop service holds
        self.on_session_end: Callable[[Session], None] | None = None

    # --- routes -----------------------------------------------------------------------------

    def route(self, topic: str) -> tuple[TopicConfig, str, int]:
        """The topic's config and the gRPC endpoint routes name (``brokerIP1`` or the bind
        address, and the gRPC port); TOPIC_NOT_FOUND for a topic the broker does not have."""
        config = self.topics.get(topic)
        if config is None:
            raise Refused(Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}")
        return config, self.config.advertised_host, self.grpc_port()

    def assignment(self, topic: str, group: str) -> tuple[TopicConfig, str, int, bool]:
        """QueryAssignment: the topic, the endpoint and whether the group is orderly (one
        assignment per queue) or not (one for the whole broker, queue id -1)."""
        config, host, port = self.route(topic)
        if not config.readable or config.read_queue_nums <= 0 or not self.permission.readable:
            raise Refused(Code.FORBIDDEN, "no readable queue")
        group_config = self._group(group)
        return config, host, port, group_config.consume_message_orderly

    # --- sessions ---------------------------------------------------------------------------

    def open_session(self, client_id: str, remote: str, push: Callable[[Any], None]) -> int:
        """A Telemetry stream opened: the client's session (a new stream replaces an older one);
        returns the session's number, for ``end_session``."""
        old = self.sessions.get(client_id)
        if old is not None:
            old.connected = False
            self._unregister(old)
        session = self.sessions[client_id] = Session(self, client_id, remote, push)
        session.number = next(self._numbers)
        return session.number

    def settings(self, client_id: str, settings: ClientSettings) -> SettingsReply:
        """A client's settings arrived: keep them, register it, and answer the server's."""
        session = self.sessions.get(client_id)
        if session is None:
            raise Refused(Code.BAD_REQUEST, "settings arrived without a Telemetry stream")
        if settings.client_type not in (PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER):
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, f"client type {settings.client_type} is not served")
        session.settings = settings
        reply = SettingsReply(max_body_bytes=self.config.max_message_size)
        if settings.client_type != PRODUCER:
            group = self._group(settings.group)
            reply.fifo = group.consume_message_orderly
            reply.max_attempts = group.retry_max_times + 1
            reply.retry_delays_s = self._retry_delays()
        self._register(session)
        return reply

    def _retry_delays(self) -> tuple[float, ...]:
        """The group's backoff: the delay levels a 4.x retry takes, from level 3 on (10 s to 2 h
        by default), in seconds."""
        levels = parse_levels(self.config.message_delay_level)
        return tuple(ms / 1000 for ms in levels[2:]) or (1.0,)

    def heartbeat(self, client_id: str, group: str, client_type: int) -> None:
        """A heartbeat: refreshes the client's registration (UNRECOGNIZED_CLIENT_TYPE before settings)."""
        session = self.sessions.get(client_id)
        if session is None or session.settings is None:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        if client_type != PRODUCER and group:
            self._group(group)
        self._register(session)

    def _register(self, session: Session) -> None:
        settings = session.settings
        if settings is None:
            return
        data = HeartbeatData(client_id=session.client_id)
        if settings.client_type == PRODUCER:
            data.producer_data_set = [ProducerData(group_name=topic) for topic in settings.topics]
        else:
            subs = [self._subscription(topic, kind, expression) for topic, kind, expression in settings.subscriptions]
            data.consumer_data_set = [ConsumerData(group_name=settings.group, consume_type="CONSUME_POP",
                                                   message_model="CLUSTERING", consume_from_where="CONSUME_FROM_LAST_OFFSET",
                                                   subscription_data_set=subs)]  # fmt: skip
        info = ClientInfo(session.client_id, "JAVA", 0, session.remote, int(self.clock.seconds() * 1000))
        self.clients.heartbeat(session, info, data)

    @staticmethod
    def _subscription(topic: str, kind: int, expression: str) -> SubscriptionData:
        if kind == 2:
            return SubscriptionData(topic, expression, [], [], 0, "SQL92", False)
        return build_subscription(topic, expression or "*", 0)

    def end_session(self, client_id: str, number: int | None = None) -> None:
        """The client said goodbye, its stream (session ``number``, if given) ended, or it went
        silent: unregister it and let its auto-renewed messages return."""
        session = self.sessions.get(client_id)
        if session is None or (number is not None and session.number != number):
            return
        del self.sessions[client_id]
        session.connected = False
        session.push(None)  # ends its Telemetry stream, if still open
        self._unregister(session)
        self.pops.client_gone(client_id)
        if self.on_session_end is not None:
            self.on_session_end(session)

    def _unregister(self, session: Session) -> None:
        self.clients.connection_closed(session)

    def online(self, client_id: str) -> bool:
        return client_id in self.sessions

    # --- send -------------------------------------------------------------------------------

    def send(self, client_id: str, remote: str, messages: list[Outgoing]) -> list[SendOutcome] | defer.Deferred:
        """Store a SendMessage's messages (all of one topic); one outcome per message."""
        topic_name = messages[0].topic
        config = self.topics.get(topic_name)
        if config is None:
            raise Refused(Code.TOPIC_NOT_FOUND, f"topic {topic_name} does not exist")
        if not self.permission.writable or not config.writable or config.write_queue_nums <= 0:
            raise Refused(Code.FORBIDDEN, "no writable queue")
        expected = config.message_type
        for out in messages:
            actual = message_type_of(out.properties)
            if actual != expected:
                raise Refused(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "TopicMessageType validate failed, the "
                              f"expected type is {expected}, but actual type is {actual}")  # fmt: skip
        host, _, port = remote.rpartition(":")
        born = HostPort(host or "0.0.0.0", int(port) if port.isdigit() else 0)
        pending = [self._send_one(config, out, born) for out in messages]
        if all(not isinstance(p, defer.Deferred) for p in pending):
            return pending
        return defer.gatherResults([p if isinstance(p, defer.Deferred) else defer.succeed(p) for p in pending])

    def _queue_for(self, config: TopicConfig, out: Outgoing) -> int:
        queues = max(1, config.write_queue_nums)
        if out.message_group:
            return consistent_hash(java_hash(out.message_group), queues)
        return next(self._round_robin) % queues

    def _send_one(self, config: TopicConfig, out: Outgoing, born: HostPort) -> SendOutcome | defer.Deferred:
        properties = dict(out.properties)
        properties["PGROUP"] = config.name
        properties["CLUSTER"] = self.config.cluster_name
        msg = Message(config.name, out.body, properties, queue_id=self._queue_for(config, out), sys_flag=out.sys_flag,
                      born_timestamp=out.born_timestamp, born_host=born)  # fmt: skip
        if out.transactional:
            if self.config.reject_transaction_message:
                return SendOutcome(Code.FORBIDDEN, "the broker takes no transactional messages (rejectTransactionMessage)")
            self.transactions.prepared()
            return self._stored(self.store.put(to_half(msg)), out, config.name, half=True)
        now_ms = int(self.wall() * 1000)
        try:
            deliver_ms = timer_delivery(properties, now_ms, self.config.timer_max_delay_sec, self.config.timer_wheel_enable)
        except TimerRefused as refused:
            return SendOutcome(Code.ILLEGAL_DELIVERY_TIME, refused.remark)
        if deliver_ms is not None:
            TimerService.park(msg, deliver_ms, now_ms)
        return self._stored(self.store.put(msg), out, config.name, half=False)

    def _stored(self, ticket: Any, out: Outgoing, topic: str, *, half: bool) -> SendOutcome | defer.Deferred:
        def outcome(_: Any, result: PutResult) -> SendOutcome:
            if not result.ok:
                code = {PutStatus.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT}.get(result.status, Code.INTERNAL_SERVER_ERROR)
                return SendOutcome(code, f"send message failed, {result.status.name} {result.remark}".rstrip())
            stored = result.messages[0]
            if half:
                self.remember_transaction(out.message_id, topic, stored.queue_offset, stored.physical_offset)
            elif self.on_put is not None:
                self.on_put(topic, 1, stored.store_size, stored.topic != topic)
            return SendOutcome(Code.OK, "OK", out.message_id, out.message_id if half else "", stored.queue_offset)

        return when_stored(ticket, outcome, None)  # type: ignore[arg-type]

    # --- transactions -----------------------------------------------------------------------

    def remember_transaction(self, transaction_id: str, group: str, queue_offset: int, commit_log_offset: int) -> None:
        """Where a transaction's half message (or its latest checked copy) is, for EndTransaction."""
        table = self._transactions
        table[transaction_id] = (group, queue_offset, commit_log_offset)
        table.move_to_end(transaction_id)
        while len(table) > MAX_TRANSACTIONS:
            table.popitem(last=False)

    def end_transaction(self, topic: str, message_id: str, transaction_id: str, resolution: int,
                        from_check: bool) -> None | defer.Deferred:  # fmt: skip
        """EndTransaction: commit (1) or roll back (2) a half message; anything else leaves it to a check-back."""
        found = self._transactions.get(transaction_id)
        if found is None:
            raise Refused(Code.INVALID_TRANSACTION_ID, f"no transaction {transaction_id} is waiting for a decision here")
        group, queue_offset, commit_log_offset = found
        decision = {1: TRANSACTION_COMMIT, 2: TRANSACTION_ROLLBACK}.get(resolution, TRANSACTION_NOT_TYPE)
        header = EndTransactionRequestHeader.CODEC.make(
            topic=topic, producer_group=group, tran_state_table_offset=queue_offset, commit_log_offset=commit_log_offset,
            commit_or_rollback=decision, from_transaction_check=from_check, msg_id=message_id, transaction_id=transaction_id,
        )  # fmt: skip
        outcome = self.transactions.end(header)
        if decision != TRANSACTION_NOT_TYPE:
            self._transactions.pop(transaction_id, None)
        if isinstance(outcome[0], int):
            code, remark = outcome
            if code != 0:
                raise Refused(Code.INTERNAL_SERVER_ERROR, remark or "the transaction was not decided")
            return None
        ticket, finish = outcome
        d: defer.Deferred = defer.Deferred()

        def done(result: PutResult) -> None:
            code, remark = finish(result)
            if code != 0:
                d.errback(Refused(Code.INTERNAL_SERVER_ERROR, remark or "the committed message was not stored"))
            else:
                d.callback(None)

        if ticket.done:
            done(ticket.result)
        else:
            ticket.add_done_callback(done)
        return d

    # --- receive, ack, invisibility ---------------------------------------------------------

    def _group(self, group: str) -> Any:
        config = self.groups.find(group)
        if config is None:
            raise Refused(Code.CONSUMER_GROUP_NOT_FOUND, self.groups.bound_remark(group) or f"group {group} does not exist")
        if not config.consume_enable:
            raise Refused(Code.FORBIDDEN, f"consumer group {group} may not consume (consumeEnable=false)")
        return config

    def receive(self, token: int, client_id: str, remote: str, group: str, topic: str, filter_type: int,
                expression: str, batch: int, invisible_s: float | None, auto_renew: bool,
                wait_s: float, arrived: float) -> defer.Deferred:  # fmt: skip
        """ReceiveMessage: deliver now or wait up to ``wait_s`` from ``arrived`` (when the gRPC
        thread read the call, on the reactor's clock: the wait is the client's, not counted from
        the hop to this thread); a Deferred of ``Received``. ``token`` names a waiting receive
        for ``cancel_receive``."""
        config, _, _ = self.route(topic)
        if not config.readable or config.read_queue_nums <= 0 or not self.permission.readable:
            raise Refused(Code.FORBIDDEN, "no readable queue")
        group_config = self._group(group)
        if filter_type == 2:
            if not self.config.enable_property_filter:
                raise Refused(Code.ILLEGAL_FILTER_EXPRESSION, "SQL92 filtering is off (enablePropertyFilter=false)")
            try:
                message_filter: Any = SqlFilter(expression)
            except SelectorError as exc:
                raise Refused(Code.ILLEGAL_FILTER_EXPRESSION, f"the SQL92 expression does not parse: {exc}") from None
        else:
            subscription = build_subscription(topic, expression or "*", 0)
            message_filter = None if subscription.sub_string == "*" else TagFilter(frozenset(subscription.code_set))
        renew_for = client_id if auto_renew and invisible_s is None else ""
        receive = Receive(group, topic, message_filter, batch, invisible_s if invisible_s is not None else 60.0,
                          renew_for=renew_for, fifo=group_config.consume_message_orderly,
                          max_attempts=group_config.retry_max_times + 1)  # fmt: skip
        queues = list(range(config.read_queue_nums))
        try:
            pending = self.pops.receive(receive, queues, conn=connection_key(remote), deadline=arrived + wait_s)
        except (InvisibleFull, ConnectionFull) as full:
            raise Refused(Code.TOO_MANY_REQUESTS, str(full)) from None

        if getattr(pending, "held", None) is not None:
            self._waiting[token] = pending

        def measured(received: Received) -> Received:
            self._waiting.pop(token, None)
            self._emit(client_id, remote, receive, arrived, wait_s, received)
            return received

        def refused(failure: Any) -> Any:
            self._waiting.pop(token, None)
            if failure.check(InvisibleFull):
                raise Refused(Code.TOO_MANY_REQUESTS, str(failure.value))
            if failure.check(GaveWay):  # the client backs off on TOO_MANY_REQUESTS, as a Java client on SYSTEM_BUSY
                self._emit(client_id, remote, receive, arrived, wait_s, failure.value.received, code="TOO_MANY_REQUESTS")
                raise Refused(Code.TOO_MANY_REQUESTS, str(failure.value), reason=OVER_FAIR_SHARE)
            return failure

        return pending.addCallbacks(measured, refused)

    def cancel_receive(self, token: int) -> None:
        """The client of a waiting receive went away: it ends without delivering."""
        pending = self._waiting.pop(token, None)
        if pending is not None:
            self.pops.cancel(pending)

    def give_back(self, group: str, topic: str, received: Received) -> None:
        """Messages delivered to a receive whose client had gone: visible again soon."""
        self.pops.give_back(group, topic, [d.handle for d in received.deliveries])

    def _emit(self, client_id: str, remote: str, receive: Receive, arrived: float, wait_s: float, received: Received,
              code: str = "MESSAGE_NOT_FOUND") -> None:  # fmt: skip
        """One pull event per queue a receive served (one for the topic, queue -1, with ``code``,
        when it served none)."""
        if not self.listeners:
            return
        by_queue: dict[int, list[Any]] = {}
        for delivery in received.deliveries:
            by_queue.setdefault(delivery.message.queue_id, []).append(delivery)
        held = received.held_since is not None
        hold_ms = (received.answered - received.held_since) * 1000 if held else 0.0
        total_ms = (self.clock.seconds() - arrived) * 1000
        done_ms = int(self.wall() * 1000)
        common = dict(ts_ms=done_ms, arrived_ms=done_ms - round(total_ms), group=receive.group,
                      topic=receive.topic, client_id=client_id, remote=remote, max_msgs=receive.batch,
                      suspend_ms=int(wait_s * 1000), held=held, hold_ms=round(hold_ms, 3),
                      service_ms=round(total_ms - hold_ms, 3), total_ms=round(total_ms, 3),
                      wake=received.wake if held else WAKE_NONE, mode="long", protocol="grpc")  # fmt: skip
        events = []
        if not by_queue:
            events.append(PullEvent(queue_id=ANY_QUEUE, offset=0, code=code, msgs=0, bytes=0,
                                    next_offset=0, max_offset=0, **common))  # fmt: skip
        for queue_id, deliveries in sorted(by_queue.items()):
            offsets = [d.message.queue_offset for d in deliveries]
            events.append(PullEvent(queue_id=queue_id, offset=min(offsets), code="OK", msgs=len(deliveries),
                                    bytes=sum(d.message.store_size for d in deliveries), next_offset=max(offsets) + 1,
                                    max_offset=self.store.max_offset(receive.topic, queue_id), **common))  # fmt: skip
        for event in events:
            for listener in self.listeners:
                listener(event)

    def ack(self, group: str, topic: str, entries: list[tuple[str, str]]) -> list[tuple[int, str]]:
        """AckMessage: one (code, message) per (message id, receipt handle)."""
        out = []
        for _message_id, handle in entries:
            try:
                self.pops.ack(group, topic, handle)
                out.append((Code.OK, "OK"))
            except ReceiptRefused as refused:
                out.append((Code.INVALID_RECEIPT_HANDLE, str(refused)))
        return out

    def change_invisible(self, group: str, topic: str, handle: str, invisible_s: float) -> str:
        """ChangeInvisibleDuration: the message's new receipt handle."""
        try:
            return self.pops.change_invisible(group, topic, handle, invisible_s)[0]
        except ReceiptRefused as refused:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, str(refused)) from None

    def forward_to_dlq(self, group: str, topic: str, handle: str) -> None:
        """ForwardMessageToDeadLetterQueue: the message goes to ``%DLQ%<group>`` and is acked."""
        self._group(group)
        try:
            self.pops.forward_to_dlq(group, topic, handle)
        except ReceiptRefused as refused:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, str(refused)) from None


__all__ = ["ClientSettings", "GrpcBroker", "SendOutcome", "Session", "SettingsReply", "consistent_hash", "java_hash"]
