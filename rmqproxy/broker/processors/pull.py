"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): docs/protocol.md, Pull answers and holds.

Pre-checks in the 4.9.8 order, the subscription (the request's with the SUBSCRIPTION flag, else
the one registered by heartbeat; none registered, or an older one, is served unfiltered where the
reference answers 24/25 — see ``_serve``), a store read, and the status → response-code table. A
first pass with the SUSPEND flag whose answer would be PULL_NOT_FOUND is held by the hold service
instead, and only that: a scan that skipped non-matching messages answers PULL_RETRY_IMMEDIATELY
at once with the offset it reached, which the client records as consumed (holding it would leave
the group's committed offset behind for a whole suspend). Every answer carries all four header
fields; SUCCESS always has a body. Each answer's next begin offset is recorded as the group's
pulled offset (consume stats' ``pullOffset``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime

from codec.bodies import SubscriptionData, build_subscription
from codec.codes import PullSysFlag, RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import PullMessageRequestHeader, PullMessageResponseHeader

from ..clients import ClientRegistry
from ...core.config import Config
from ...net.dispatch import Route
from ...core.clocks import Wall
from ...core.hold import WAKE_DISCONNECT, WAKE_EVICTED, WAKE_NONE, HeldPull, HoldService, always
from ...net.rejects import OVER_FAIR_SHARE
from ..permission import BrokerPermission
from ...observe.pull_events import PullEvent
from ..sql92 import SelectorError, SqlFilter
from ..store import GetResult, GetStatus, MessageFilter, MessageStore, TagFilter
from ..subgroups import FAQ_TODO, SubscriptionGroupTable
from ..topics import TopicTable

SYSFLAG_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)  # plain ints: tested on every pull
SYSFLAG_SUSPEND = int(PullSysFlag.SUSPEND)
SYSFLAG_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)
SYSFLAG_CLASS_FILTER = int(PullSysFlag.CLASS_FILTER)

_STATUS_CODES: dict[GetStatus, int] = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def response_code(status: GetStatus, requested_offset: int) -> int:
    """``PullMessageProcessor``'s switch as a table; an empty or missing queue is NOT_FOUND at
    offset 0 and OFFSET_MOVED elsewhere."""
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_NOT_FOUND if requested_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    return _STATUS_CODES[status]


def pull_response(request: RemotingCommand, result: GetResult, requested_offset: int) -> RemotingCommand:
    header = PullMessageResponseHeader.CODEC.make(
        suggest_which_broker_id=0,
        next_begin_offset=result.next_begin_offset,
        min_offset=result.min_offset,
        max_offset=result.max_offset,
    )
    code = response_code(result.status, requested_offset)
    body = result.body if code == ResponseCode.SUCCESS else b""
    return request.response(code, result.status.value, header.to_ext(), body)


class PullContext(NamedTuple):
    """What the pull path needs of one pull, made once when it is read (a tuple: one per pull)."""

    request: RemotingCommand
    header: PullMessageRequestHeader
    conn: Any  # the client's ``transport.Connection``
    arrived: float  # when the request was read (clock seconds)


class PullProcessor:
    def __init__(
        self,
        config: Config,
        store: MessageStore,
        topics: TopicTable,
        clients: ClientRegistry,
        holds: HoldService,
        clock: IReactorTime,
        listeners: list[Callable[[PullEvent], None]] | None = None,
        permission: BrokerPermission | None = None,
        *,
        groups: SubscriptionGroupTable,
        wall: Wall,
        on_reject: Callable[..., Any] | None = None,
    ) -> None:
        self.config = config
        self.on_reject = on_reject  # counts a held pull ended busy at maxHeldPulls (``rejects.Rejections``)
        self.permission = permission  # brokerPermission without READ refuses every pull
        self.groups = groups
        self.store = store
        self.topics = topics
        self.clients = clients
        self.holds = holds
        self.clock = clock  # the reactor's (monotonic): arrival, hold and answer times
        self.wall = wall  # the event log's timestamps
        self.listeners = listeners if listeners is not None else []

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table (pulls time themselves, hold included)."""
        return [
            Route(RequestCode.PULL_MESSAGE, self.pull, measured=False),
            Route(RequestCode.LITE_PULL_MESSAGE, self.pull, measured=False),
        ]

    def pull(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        """Answer now, or hold and answer later; either way one ``PullEvent`` per pull."""
        arrived = self.clock.seconds()
        pull = PullContext(request, header, conn, arrived)
        outcome = self._serve(pull)
        if not isinstance(outcome, defer.Deferred):
            self._emit(pull, None, arrived, WAKE_NONE, outcome)
        return outcome

    def _refusal(self, pull: PullContext) -> RemotingCommand | None:
        """The answer to a pull the broker, its group or its topic does not allow now, or None.
        Checked again when a held pull wakes, as the reference re-runs a woken pull: a group
        disabled or a topic made unreadable meanwhile gets no messages."""
        request, header, conn = pull.request, pull.header, pull.conn
        if self.permission is not None and not self.permission.readable:
            return request.response(
                ResponseCode.NO_PERMISSION, f"the broker[{self.config.advertised_host}] pulling message is forbidden"
            )
        group_config = self.groups.find(header.consumer_group)
        if group_config is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                self.groups.bound_remark(header.consumer_group)
                or f"subscription group [{header.consumer_group}] does not exist, {FAQ_TODO}",
            )
        if not group_config.consume_enable:
            return request.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}")
        topic = self.topics.get(header.topic)
        if topic is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not topic.readable:
            return request.response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
            )
        if not 0 <= header.queue_id < topic.read_queue_nums:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] topicConfig.readQueueNums:"
                f"[{topic.read_queue_nums}] consumer:[{conn.remote}]",
            )
        return None

    def _serve(self, pull: PullContext) -> RemotingCommand | defer.Deferred:
        request, header, conn = pull.request, pull.header, pull.conn
        refused = self._refusal(pull)
        if refused is not None:
            return refused
        group_config = self.groups.find(header.consumer_group)
        sys_flag = header.sys_flag
        if sys_flag & SYSFLAG_SUBSCRIPTION:
            if (header.expression_type or "TAG") == "TAG":
                subscription = build_subscription(header.topic, header.subscription, header.sub_version)
            else:  # a selector: no tags to split out of it
                subscription = SubscriptionData(header.topic, header.subscription, [], [], header.sub_version,
                                                header.expression_type, False)  # fmt: skip
        else:
            group = self.clients.consumer_group(header.consumer_group)
            if group is not None and group.message_model == "BROADCASTING" and not group_config.consume_broadcast_enable:
                return request.response(
                    ResponseCode.NO_PERMISSION,
                    f"the consumer group[{header.consumer_group}] can not consume by broadcast way",
                )
            subscription = group.subscriptions.get(header.topic) if group is not None else None
            if subscription is None or (subscription.sub_version or 0) < header.sub_version:
                # The reference answers 24 (not registered) or 25 (registered one older than the
                # client's), and the client retries 1-3 s later until its next heartbeat: up to
                # 30 s of nothing after a broker restart (4.9.x does not re-heartbeat on
                # reconnect) or a 5.x start-up heartbeat race. Serving a tag consumer without
                # broker-side filtering is safe: the client filters by its own tag strings. An
                # SQL92 consumer is not filtered by its client, so it waits for its heartbeat.
                if (header.expression_type or "TAG") != "TAG":
                    return request.response(
                        ResponseCode.SUBSCRIPTION_NOT_LATEST if subscription is not None else ResponseCode.SUBSCRIPTION_NOT_EXIST,
                        "the consumer's subscription not latest" if subscription is not None
                        else "the consumer's subscription not exist",
                    )  # fmt: skip
                subscription = build_subscription(header.topic, "*", header.sub_version)
        message_filter: MessageFilter | None = None
        if (subscription.expression_type or "TAG") != "TAG":
            sql = self._sql_filter(subscription, sys_flag & SYSFLAG_SUBSCRIPTION)
            if isinstance(sql, tuple):
                return request.response(*sql)
            message_filter = sql
        elif not (sys_flag & SYSFLAG_CLASS_FILTER or subscription.class_filter_mode or subscription.sub_string == "*"):
            message_filter = TagFilter(frozenset(subscription.code_set))

        def read() -> GetResult:
            return self.store.get_message(
                header.consumer_group, header.topic, header.queue_id, header.queue_offset, header.max_msg_nums,
                message_filter, header.max_msg_bytes,
            )  # fmt: skip

        result = read()
        if sys_flag & SYSFLAG_COMMIT_OFFSET:
            self.store.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        not_found = response_code(result.status, header.queue_offset) == ResponseCode.PULL_NOT_FOUND
        if not_found and sys_flag & SYSFLAG_SUSPEND:
            if self.holds.conn_full(conn):
                return request.response(
                    ResponseCode.SYSTEM_BUSY,
                    f"this connection already holds {self.holds.max_held_per_conn} pulls "
                    "(maxHeldPullsPerConnection); try again later",
                )
            held = self._hold(pull, read, message_filter)
            if held is not None:
                return held
        return self._answer(pull, result)

    def _sql_filter(self, subscription: SubscriptionData, in_request: int) -> SqlFilter | tuple[int, str]:
        """The SQL92 filter of a subscription, or the reference's refusal: property filtering off
        (1), an expression sent with the pull that does not compile (23), a registered one that
        does not (27; CHECK_CLIENT_CONFIG refused it already at the consumer's start)."""
        kind = subscription.expression_type
        if kind != "SQL92" or not self.config.enable_property_filter:
            return ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {kind}"
        try:
            return SqlFilter(subscription.sub_string or "")
        except SelectorError:
            if in_request:
                return ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
            return ResponseCode.FILTER_DATA_NOT_EXIST, "The broker's consumer filter data is not exist!Your expression may be wrong!"

    def _answer(self, pull: PullContext, result: GetResult) -> RemotingCommand:
        """The pull response for ``result``; records its next begin offset as the group's pulled one."""
        header = pull.header
        self.store.offsets.record_pulled(header.consumer_group, header.topic, header.queue_id, result.next_begin_offset)
        return pull_response(pull.request, result, header.queue_offset)

    def _hold(self, pull: PullContext, read: Callable[[], GetResult], message_filter: MessageFilter | None):
        """Hold the pull until something matching arrives or its deadline; None if not held."""
        header = pull.header
        if self.config.long_polling:
            timeout_s = min(max(0, header.suspend_timeout_millis), self.config.max_pull_suspend_ms) / 1000
        else:
            timeout_s = self.config.short_polling_ms / 1000
        d: defer.Deferred = defer.Deferred()
        started = self.clock.seconds()

        # ``reread`` must not refer to the HeldPull that holds it: that cycle left every held
        # pull's objects to the cyclic garbage collector, whose full passes stall the reactor.
        def reread(wake: str, final: bool) -> bool:
            woke = self.clock.seconds()
            if wake == WAKE_DISCONNECT:
                self._emit(pull, started, woke, wake, None)
                return True
            if wake == WAKE_EVICTED:  # gave way at maxHeldPulls: SYSTEM_BUSY, and the client backs off
                busy = pull.request.response(ResponseCode.SYSTEM_BUSY, self.holds.eviction_remark)
                if self.on_reject is not None:
                    self.on_reject(OVER_FAIR_SHARE, "a held pull of {group} from {conn} answered SYSTEM_BUSY: {remark}",
                                   group=header.consumer_group, conn=pull.conn.remote, remark=busy.remark)  # fmt: skip
                self._emit(pull, started, woke, wake, busy)
                d.callback(busy)
                return True
            try:
                refused = self._refusal(pull)
                if refused is not None:
                    self._emit(pull, started, woke, wake, refused)
                    d.callback(refused)
                    return True
                result = read()
                if result.status != GetStatus.FOUND and not final:
                    return False
                response = self._answer(pull, result)
            except Exception:  # the hold service logs and counts it; the client gets an answer it retries
                d.callback(pull.request.response(ResponseCode.SYSTEM_ERROR, "rmqproxy: re-reading this held pull failed"))
                raise
            self._emit(pull, started, woke, wake, response)
            d.callback(response)
            return True

        held = HeldPull(
            key=(header.topic, header.queue_id), offset=header.queue_offset,
            matches=message_filter.matches_arrival if message_filter is not None else always, conn=pull.conn,
            reread=reread, started=started, deadline=started + timeout_s, group=header.consumer_group,
        )  # fmt: skip
        if not self.holds.hold(held):
            return None
        return d

    def _emit(self, pull: PullContext, hold_started: float | None, woke: float, wake: str,
              response: RemotingCommand | None) -> None:  # fmt: skip
        """Tell listeners (event log, metrics) how this pull went: hold time is hold start to
        wake; service time is the rest of arrival to answer."""
        if not self.listeners:
            return
        client = self.clients.client_of(pull.conn)
        event = PullEvent.of_pull(
            pull.header, response, arrived=pull.arrived, done=self.clock.seconds(),
            done_ms=int(self.wall() * 1000), held=hold_started is not None,
            hold_ms=(woke - hold_started) * 1000 if hold_started is not None else 0.0, wake=wake,
            mode="long" if self.config.long_polling else "short", client_id=client.client_id if client is not None else "",
            remote=pull.conn.remote,
        )  # fmt: skip
        for listener in self.listeners:
            listener(event)

