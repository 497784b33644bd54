"""``apache.rocketmq.v2.MessagingService`` on the gRPC thread: each RPC reads its caller from the
metadata, decodes and checks its request (``convert``), hands plain values to the reactor
(``GrpcBroker`` through ``GrpcFront.call``) and encodes the answer with the reference's status
codes. Offset-based RPCs (PullMessage, UpdateOffset, GetOffset, QueryOffset) and RecallMessage
are not served: they answer gRPC UNIMPLEMENTED with what to use instead, as the 5.3 Proxy does
for the offset RPCs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.unknown_fields import UnknownFieldSet
from twisted.logger import Logger

from ...grpc_wire import pb, rpc
from ...net.grpc_front import GrpcFront
from .broker import PRODUCER, RECEIVE_BATCH, LONG_POLLING_S, ClientSettings, GrpcBroker, SettingsReply
from ..acl import PERM_ANY, PERM_PUB, PERM_SUB, RETRY
from .convert import Code, Refused, check_group, check_topic, outgoing, status, to_wire

log = Logger()

#: Invisible durations a receive may ask for (the reference's minimum is 10 s) and a change may set.
MIN_RECEIVE_INVISIBLE_S = 1.0
MAX_INVISIBLE_S = 12 * 3600.0
#: What a receive is answered ahead of its RPC deadline, so the answer is on the wire in time.
DEADLINE_MARGIN_S = 0.2


def unknown_fields(message: Any, path: str) -> list[str]:
    """Where ``message`` and the messages in it carry fields this schema does not have, as
    ``path.field#number``: a newer client's field would otherwise be dropped without a word."""
    found = [f"{path}#{n}" for n in sorted({f.field_number for f in UnknownFieldSet(message)})]
    for name, kind in _nested(message.DESCRIPTOR):
        if not (kind == "one" and message.HasField(name)) and not (kind != "one" and getattr(message, name)):
            continue
        value = getattr(message, name)
        items = ([(name, value)] if kind == "one" else enumerate(value) if kind == "list" else value.items())
        for key, item in items:
            found += unknown_fields(item, f"{path}.{name}" if kind == "one" else f"{path}.{name}[{key}]")
    return found


@functools.cache
def _nested(descriptor: Any) -> tuple[tuple[str, str], ...]:
    """The fields of a message type that hold messages, each with how: ``one``, ``list`` or ``map``
    (maps of scalars left out)."""
    nested = []
    for field in descriptor.fields:
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                nested.append((field.name, "map"))
        else:
            nested.append((field.name, "list" if field.is_repeated else "one"))
    return tuple(nested)


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who called: the client id and address, from the metadata and the connection."""

    client_id: str
    remote: str
    version: str


def _duration_s(duration: Any) -> float:
    return duration.seconds + duration.nanos / 1e9


class MessagingService(rpc.MessagingServiceServicer):
    """The servicer (see the module docstring)."""

    def __init__(self, front: GrpcFront, broker: GrpcBroker, *, max_body_bytes: Callable[[], int],
                 max_wait_s: Callable[[], float], access: Any = None,
                 rejections: Callable[..., None] | None = None,
                 on_rpc: Callable[[str, str, float], None] | None = None) -> None:  # fmt: skip
        self.front = front
        self.broker = broker
        self.max_body_bytes = max_body_bytes
        self.max_wait_s = max_wait_s
        self.access = access  # ``acl.AccessControl`` with aclEnable=true, else None (the header is ignored)
        self.rejections = rejections
        self.on_rpc = on_rpc  # (rpc name, status code name, ms): rocketmq_rpc_latency, on the reactor
        self._tokens = itertools.count(1)
        self._request_timeouts: dict[str, float] = {}  # client id -> its settings' request timeout (gRPC thread's copy)

    # --- common -----------------------------------------------------------------------------

    def _caller(self, context: Any, request: Any = None, needed: list[tuple[str, int]] | None = None) -> Caller:
        """Who calls, from the metadata: checked for a client id, unknown fields in ``request``
        and, with ACL on, a good signature and the ``needed`` (resource, perm) pairs."""
        metadata = {key: value for key, value in context.invocation_metadata() or ()}
        client_id = str(metadata.get("x-mq-client-id", "")).strip()
        if not client_id:
            raise Refused(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")
        if request is not None:
            unknown = unknown_fields(request, type(request).__name__)
            if unknown:
                raise Refused(Code.BAD_REQUEST, f"unknown fields {', '.join(unknown)}: this server speaks "
                              "apache.rocketmq.v2 as of rocketmq-apis 2.0.4")  # fmt: skip
        caller = Caller(client_id, self.front.peer_of(context.peer()), str(metadata.get("x-mq-client-version", "")))
        if self.access is not None:
            denied = self.access.check_grpc(metadata.get("authorization"), metadata.get("x-mq-date-time"),
                                            caller.remote.rpartition(":")[0], needed or [])  # fmt: skip
            if denied is not None:
                raise Refused(Code.UNAUTHORIZED, denied.message, reason=denied.reason)
        return caller

    def _reject(self, refused: Refused, rpc_name: str) -> None:
        """Count a refusal in ``rmqproxy_rejected_requests_total`` (logged at the rejections' rate)."""
        if self.rejections is not None:
            self.front.reactor.callFromThread(self.rejections, refused.reason or f"grpc_{pb.Code.Name(refused.code).lower()}",
                                              "gRPC {rpc} refused: {message}", rpc=rpc_name, message=refused.message)  # fmt: skip

    async def _unary(self, response_type: Any, context: Any, handle: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``handle``; a ``Refused`` becomes the response's status (and is counted), anything
        else INTERNAL_SERVER_ERROR; the call's time goes to ``rocketmq_rpc_latency``."""
        started = time.monotonic()
        rpc_name = response_type.__name__.removesuffix("Response")
        try:
            response = await handle()
        except Refused as refused:
            self._reject(refused, rpc_name)
            response = response_type(status=status(refused.code, refused.message))
        except Exception as exc:
            log.failure("gRPC {rpc} failed", rpc=rpc_name)
            response = response_type(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))
        if self.on_rpc is not None:
            elapsed_ms = (time.monotonic() - started) * 1000
            self.front.reactor.callFromThread(self.on_rpc, _snake(rpc_name), pb.Code.Name(response.status.code), elapsed_ms)
        return response

    # --- routes and sessions ----------------------------------------------------------------

    async def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802 (the RPC's name)
        async def handle() -> Any:
            topic = check_topic(request.topic.name)
            self._caller(context, request, [(topic, PERM_ANY)])
            config, host, port = await self.front.call(self.broker.route, topic)
            response = pb.QueryRouteResponse(status=status(Code.OK))
            response.message_queues.extend(_route_queues(request.topic, config, host, port, self.broker.config.broker_name))
            return response

        return await self._unary(pb.QueryRouteResponse, context, handle)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            topic, group = check_topic(request.topic.name), check_group(request.group.name)
            self._caller(context, request, [(topic, PERM_SUB), (RETRY + group, PERM_SUB)])
            config, host, port, orderly = await self.front.call(self.broker.assignment, topic, group)
            response = pb.QueryAssignmentResponse(status=status(Code.OK))
            broker = _broker(self.broker.config.broker_name, host, port)
            ids = range(config.read_queue_nums) if orderly else (-1,)
            for queue_id in ids:
                queue = response.assignments.add().message_queue
                queue.topic.CopyFrom(request.topic)
                queue.id = queue_id
                queue.permission = _permission(config.perm)
                queue.broker.CopyFrom(broker)
                queue.accept_message_types.append(_type(config.message_type))
            return response

        return await self._unary(pb.QueryAssignmentResponse, context, handle)

    async def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            group = check_group(request.group.name) if request.HasField("group") and request.group.name else ""
            caller = self._caller(context, request, [(RETRY + group, PERM_SUB)] if group else [])
            await self.front.call(self.broker.heartbeat, caller.client_id, group, request.client_type)
            return pb.HeartbeatResponse(status=status(Code.OK))

        return await self._unary(pb.HeartbeatResponse, context, handle)

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            if request.HasField("group") and request.group.name:
                check_group(request.group.name)
            caller = self._caller(context, request)
            await self.front.call(self.broker.end_session, caller.client_id, None)
            self._request_timeouts.pop(caller.client_id, None)
            return pb.NotifyClientTerminationResponse(status=status(Code.OK))

        return await self._unary(pb.NotifyClientTerminationResponse, context, handle)

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        """The client's settings in, the server's settings and commands (check-backs) out."""
        try:
            caller = self._caller(context)
        except Refused as refused:
            self._reject(refused, "Telemetry")
            code = grpc.StatusCode.UNAUTHENTICATED if refused.code == Code.UNAUTHORIZED else grpc.StatusCode.INVALID_ARGUMENT
            await context.abort(code, refused.message)
            return
        out: asyncio.Queue = asyncio.Queue(maxsize=0)
        loop = asyncio.get_running_loop()

        def push(item: Any) -> None:  # on the reactor thread
            self.front.post(out.put_nowait, item)

        number = await self.front.call(self.broker.open_session, caller.client_id, caller.remote, push)

        async def read() -> None:
            try:
                async for command in request_iterator:
                    out.put_nowait(await self._telemetry_in(caller, command, context))
            except Exception as exc:  # the client's half ended badly: end the stream
                if not isinstance(exc, asyncio.CancelledError):
                    log.debug("telemetry of {client} ended: {error}", client=caller.client_id, error=exc)
            finally:
                out.put_nowait(None)

        reader = loop.create_task(read())
        try:
            while True:
                item = await out.get()
                if item is None:
                    break
                if isinstance(item, tuple):
                    item = _recover_command(item)
                if item is not None:
                    yield item
        finally:
            reader.cancel()
            self._request_timeouts.pop(caller.client_id, None)
            self.front.reactor.callFromThread(self.broker.end_session, caller.client_id, number)

    async def _telemetry_in(self, caller: Caller, command: Any, context: Any) -> Any:
        """One command from the client: its settings get the server's; nothing else is answered."""
        which = command.WhichOneof("command")
        if which != "settings":
            return None
        settings = command.settings
        try:
            mine = _client_settings(settings)
            if self.access is not None:  # the topics it publishes to, the group it consumes for
                needed = [(t, PERM_PUB) for t in mine.topics] + [(t, PERM_SUB) for t, _, _ in mine.subscriptions]
                self._caller(context, None, needed + ([(RETRY + mine.group, PERM_SUB)] if mine.group else []))
            reply = await self.front.call(self.broker.settings, caller.client_id, mine)
        except Refused as refused:
            self._reject(refused, "Telemetry")
            return pb.TelemetryCommand(status=status(refused.code, refused.message))
        self._request_timeouts[caller.client_id] = mine.request_timeout_s
        return pb.TelemetryCommand(status=status(Code.OK), settings=_server_settings(settings, reply))

    # --- send -------------------------------------------------------------------------------

    async def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            if not request.messages:
                raise Refused(Code.MESSAGE_CORRUPTED, "no message to send")
            topic = check_topic(request.messages[0].topic.name)
            if any(m.topic.name != topic for m in request.messages):
                raise Refused(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            caller = self._caller(context, request, [(topic, PERM_PUB)])
            now_ms = int(self.broker.wall() * 1000)  # a float read: safe off the reactor thread
            messages = [outgoing(m, max_body=self.max_body_bytes(), remote=caller.remote, now_ms=now_ms)
                        for m in request.messages]  # fmt: skip
            outcomes = await self.front.call(self.broker.send, caller.client_id, caller.remote, messages)
            response = pb.SendMessageResponse()
            codes = set()
            for outcome in outcomes:
                entry = response.entries.add(status=status(outcome.code, outcome.message), message_id=outcome.message_id,
                                             transaction_id=outcome.transaction_id, offset=outcome.offset)  # fmt: skip
                codes.add(entry.status.code)
            response.status.CopyFrom(_common_status(codes, outcomes[0].message if len(codes) == 1 else ""))
            return response

        return await self._unary(pb.SendMessageResponse, context, handle)

    async def EndTransaction(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            topic = check_topic(request.topic.name)
            self._caller(context, request, [(topic, PERM_PUB)])
            if not request.transaction_id.strip():
                raise Refused(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
            await self.front.call(self.broker.end_transaction, topic, request.message_id, request.transaction_id,
                                  request.resolution, request.source == pb.SOURCE_SERVER_CHECK)  # fmt: skip
            return pb.EndTransactionResponse(status=status(Code.OK))

        return await self._unary(pb.EndTransactionResponse, context, handle)

    # --- receive, ack, invisibility ---------------------------------------------------------

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        """A pop: the status, each message, then the server's time as ``delivery_timestamp``."""
        arrived = self.front.reactor.seconds()  # a float read: safe off the reactor thread
        try:
            group = check_group(request.group.name)
            topic = check_topic(request.message_queue.topic.name)
            caller = self._caller(context, request, [(topic, PERM_SUB), (RETRY + group, PERM_SUB)])
            invisible_s: float | None = None
            if request.HasField("invisible_duration"):
                invisible_s = _duration_s(request.invisible_duration)
                if not MIN_RECEIVE_INVISIBLE_S <= invisible_s <= MAX_INVISIBLE_S:
                    raise Refused(Code.ILLEGAL_INVISIBLE_TIME, f"the invisible duration must be within "
                                  f"[{MIN_RECEIVE_INVISIBLE_S:.0f} s, {MAX_INVISIBLE_S / 3600:.0f} h], not {invisible_s} s")  # fmt: skip
            elif not request.auto_renew:
                raise Refused(Code.ILLEGAL_INVISIBLE_TIME, "a receive without auto_renew needs an invisible_duration")
            wait_s = self._wait_s(request, context, caller)
            batch = min(max(1, request.batch_size), RECEIVE_BATCH)
            token = next(self._tokens)
            expression = request.filter_expression
            received = await self._await_receive(token, group, topic, caller, expression.type or pb.TAG,
                                                 expression.expression, batch, invisible_s, request.auto_renew, wait_s,
                                                 arrived)  # fmt: skip
        except Refused as refused:
            self._reject(refused, "ReceiveMessage")
            yield pb.ReceiveMessageResponse(status=status(refused.code, refused.message))
            yield _server_time(self.broker.wall())
            return
        deliveries = received.deliveries
        if not deliveries:
            yield pb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
            yield _server_time(self.broker.wall())
            return
        sent = 0
        try:
            yield pb.ReceiveMessageResponse(status=status(Code.OK))
            for delivery in deliveries:
                left_ms = max(0, round((delivery.visible_at - received.answered) * 1000))
                yield pb.ReceiveMessageResponse(message=to_wire(delivery.message, attempt=delivery.attempt,
                                                                handle=delivery.handle, invisible_ms=left_ms))  # fmt: skip
                sent += 1
            yield _server_time(self.broker.wall())
        finally:
            if sent < len(deliveries):  # the client went away mid-answer: the rest return soon
                unsent = received._replace(deliveries=deliveries[sent:])
                self.front.reactor.callFromThread(self.broker.give_back, group, topic, unsent)

    def _wait_s(self, request: Any, context: Any, caller: Caller) -> float:
        """How long a receive may wait: its ``long_polling_timeout``, else its deadline less its
        settings' request timeout (the Go client sends none); never past its deadline."""
        remaining = context.time_remaining()
        if request.HasField("long_polling_timeout"):
            wait = _duration_s(request.long_polling_timeout)
        elif remaining is not None:
            wait = remaining - self._request_timeouts.get(caller.client_id, 3.0)
        else:
            wait = LONG_POLLING_S
        if remaining is not None:
            if remaining <= DEADLINE_MARGIN_S:
                raise Refused(Code.ILLEGAL_POLLING_TIME, "The deadline time remaining is not enough for polling, "
                              "please check network condition")  # fmt: skip
            wait = min(wait, remaining - DEADLINE_MARGIN_S)
        return max(0.0, min(wait, self.max_wait_s()))

    async def _await_receive(self, token: int, group: str, topic: str, caller: Caller, *args: Any) -> Any:
        """The broker's receive; a client that goes away while it waits cancels it."""
        try:
            return await self.front.call(self.broker.receive, token, caller.client_id, caller.remote, group, topic,
                                         *args)  # fmt: skip
        except asyncio.CancelledError:
            self.front.reactor.callFromThread(self.broker.cancel_receive, token)
            raise

    async def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            group, topic = check_group(request.group.name), check_topic(request.topic.name)
            self._caller(context, request, [(topic, PERM_SUB), (RETRY + group, PERM_SUB)])
            entries = [(e.message_id, e.receipt_handle) for e in request.entries]
            results = await self.front.call(self.broker.ack, group, topic, entries)
            response = pb.AckMessageResponse()
            codes = set()
            for entry, (code, message) in zip(request.entries, results):
                response.entries.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                     status=status(code, message))  # fmt: skip
                codes.add(code)
                if code != Code.OK:
                    self._reject(Refused(code, message), "AckMessage")
            response.status.CopyFrom(_common_status(codes, results[0][1] if len(codes) == 1 and results else "OK"))
            return response

        return await self._unary(pb.AckMessageResponse, context, handle)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            group, topic = check_group(request.group.name), check_topic(request.topic.name)
            self._caller(context, request, [(topic, PERM_SUB), (RETRY + group, PERM_SUB)])
            invisible_s = _duration_s(request.invisible_duration)
            if not 0 <= invisible_s <= MAX_INVISIBLE_S:
                raise Refused(Code.ILLEGAL_INVISIBLE_TIME, f"the invisible duration must be within [0, 12 h], not {invisible_s} s")
            handle_text = await self.front.call(self.broker.change_invisible, group, topic, request.receipt_handle, invisible_s)
            return pb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=handle_text)

        return await self._unary(pb.ChangeInvisibleDurationResponse, context, handle)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:  # noqa: N802
        async def handle() -> Any:
            group, topic = check_group(request.group.name), check_topic(request.topic.name)
            self._caller(context, request, [(topic, PERM_SUB), (RETRY + group, PERM_SUB)])
            await self.front.call(self.broker.forward_to_dlq, group, topic, request.receipt_handle)
            return pb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.OK))

        return await self._unary(pb.ForwardMessageToDeadLetterQueueResponse, context, handle)

    # --- not served -------------------------------------------------------------------------

    async def _unserved(self, context: Any, rpc_name: str, instead: str) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"rmqproxy does not serve {rpc_name}: {instead}")

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        await self._unserved(context, "PullMessage", "consume with a SimpleConsumer or PushConsumer (receive and ack)")
        yield pb.PullMessageResponse()  # never reached: makes this a stream handler

    async def UpdateOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._unserved(context, "UpdateOffset", "offsets of gRPC consumers follow their acks")

    async def GetOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._unserved(context, "GetOffset", "read a group's offsets with mqadmin consumerProgress")

    async def QueryOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._unserved(context, "QueryOffset", "read a queue's offsets with mqadmin topicStatus")

    async def RecallMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._unserved(context, "RecallMessage", "a delayed message cannot be recalled here")


# --- encoding helpers --------------------------------------------------------------------------

_TYPES = {"NORMAL": pb.NORMAL, "FIFO": pb.FIFO, "DELAY": pb.DELAY, "TRANSACTION": pb.TRANSACTION}


def _snake(name: str) -> str:
    """``SendMessage`` -> ``send_message``: the request label of ``rocketmq_rpc_latency``."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def _type(name: str) -> int:
    return _TYPES.get(name, pb.MESSAGE_TYPE_UNSPECIFIED)


def _permission(perm: int) -> int:
    readable, writable = bool(perm & 4), bool(perm & 2)
    if readable and writable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writable else pb.NONE


def _endpoints(host: str, port: int) -> Any:
    import ipaddress

    try:
        scheme = pb.IPv6 if ipaddress.ip_address(host).version == 6 else pb.IPv4
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def _broker(name: str, host: str, port: int) -> Any:
    return pb.Broker(name=name, id=0, endpoints=_endpoints(host, port))


def _route_queues(topic: Any, config: Any, host: str, port: int, broker_name: str) -> list[Any]:
    """A topic's queues as QueryRoute lists them: read-only, write-only, read-write, then none."""
    broker = _broker(broker_name, host, port)
    readable, writable = bool(config.perm & 4), bool(config.perm & 2)
    read, write = config.read_queue_nums, config.write_queue_nums
    both = min(read, write) if readable and writable else 0
    kinds = [(pb.READ, read - both if readable else 0), (pb.WRITE, write - both if writable else 0), (pb.READ_WRITE, both)]
    if not readable and not writable:
        kinds = [(pb.NONE, max(1, read, write))]
    queues, next_id = [], 0
    accept = _type(config.message_type)
    for permission, count in kinds:
        for _ in range(max(0, count)):
            queues.append(pb.MessageQueue(topic=topic, id=next_id, permission=permission, broker=broker,
                                          accept_message_types=[accept]))  # fmt: skip
            next_id += 1
    return queues


def _common_status(codes: set[int], message: str) -> Any:
    if len(codes) > 1:
        return status(Code.MULTIPLE_RESULTS, "multiple results")
    code = next(iter(codes), Code.OK)
    return status(code, message or ("OK" if code == Code.OK else ""))


def _server_time(now: float) -> Any:
    """The last item of a receive's stream: the server's wall-clock time ``now``, as the reference sends."""
    response = pb.ReceiveMessageResponse()
    response.delivery_timestamp.FromMilliseconds(int(now * 1000))
    return response


def _client_settings(settings: Any) -> ClientSettings:
    mine = ClientSettings(client_type=settings.client_type)
    if settings.HasField("request_timeout"):
        mine.request_timeout_s = _duration_s(settings.request_timeout)
    if settings.HasField("publishing"):
        mine.topics = tuple(check_topic(t.name) for t in settings.publishing.topics)
    if settings.HasField("subscription"):
        sub = settings.subscription
        if sub.HasField("group"):
            mine.group = check_group(sub.group.name)
        mine.subscriptions = tuple((check_topic(s.topic.name), s.expression.type or pb.TAG, s.expression.expression)
                                   for s in sub.subscriptions)  # fmt: skip
        if sub.HasField("long_polling_timeout"):
            mine.long_polling_s = _duration_s(sub.long_polling_timeout)
    if settings.client_type != PRODUCER and not mine.group:
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, "a consumer's settings must name its group")
    return mine


def _server_settings(client: Any, reply: SettingsReply) -> Any:
    """The client's settings with the server's merged in (what a 5.x Proxy answers)."""
    out = pb.Settings()
    out.CopyFrom(client)
    out.metric.on = False
    if client.client_type == PRODUCER:
        out.backoff_policy.Clear()
        out.backoff_policy.max_attempts = 3
        exp = out.backoff_policy.exponential_backoff
        exp.initial.FromMilliseconds(10)
        exp.max.FromMilliseconds(1000)
        exp.multiplier = 2.0
        out.publishing.max_body_size = reply.max_body_bytes
        out.publishing.validate_message_type = True
    else:
        out.backoff_policy.Clear()
        out.backoff_policy.max_attempts = reply.max_attempts
        for delay in reply.retry_delays_s:
            out.backoff_policy.customized_backoff.next.add().FromMilliseconds(int(delay * 1000))
        out.subscription.fifo = reply.fifo
        out.subscription.receive_batch_size = RECEIVE_BATCH
        out.subscription.long_polling_timeout.FromSeconds(int(LONG_POLLING_S))
    return out


def _recover_command(item: tuple) -> Any:
    """A check-back from the reactor as a Telemetry command: the half message shown in its real topic."""
    kind, message, transaction_id = item
    if kind != "recover":
        return None
    real = message.properties.get("REAL_TOPIC")
    if real:
        message.topic = real
    command = pb.TelemetryCommand(status=status(Code.OK))
    command.recover_orphaned_transaction_command.message.CopyFrom(to_wire(message, attempt=1))
    command.recover_orphaned_transaction_command.transaction_id = transaction_id
    return command


def add_service(server: Any, front: GrpcFront, broker: GrpcBroker, **options: Any) -> None:
    """Register the servicer with a gRPC server (``GrpcFront``'s ``add_services``)."""
    rpc.add_MessagingServiceServicer_to_server(MessagingService(front, broker, **options), server)


__all__ = ["Caller", "MessagingService", "add_service"]
