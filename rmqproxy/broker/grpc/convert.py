"""Messages and checks between the gRPC wire and the store, on the gRPC thread: what a send's
messages become (properties as a 5.x Proxy writes them), what a stored message looks like to a
5.x client, and the name and size checks with the reference's codes and words. Nothing here
touches the reactor's tables."""

from __future__ import annotations

import hashlib
import dataclasses
from typing import Any

from codec.message import COMPRESSED_FLAG, Message

from ...core.names import DLQ_PREFIX, RETRY_PREFIX, SYSTEM_TOPICS, check_group_name, check_topic_name
from ...grpc_wire import pb

#: Property keys a client may not set as user properties (Java ``MessageConst.STRING_HASH_SET``).
SYSTEM_PROPERTY_KEYS = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET",
    "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET",
    "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES",
    "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
})  # fmt: skip
#: What else the store keeps that a 5.x client is not shown as a user property.
_HIDDEN = SYSTEM_PROPERTY_KEYS | {"__SHARDINGKEY", "TRACE_CONTEXT", "CHECK_IMMUNITY_TIME_IN_SECONDS",
                                  "TRANSACTION_CHECK_TIMES", "__transactionId__"}  # fmt: skip

#: A 5.x Proxy's limits (``ProxyConfig``): user properties, their bytes, a message group's bytes,
#: the longest delay and the longest transaction recovery time.
MAX_USER_PROPERTIES = 128
MAX_USER_PROPERTY_BYTES = 16 * 1024
MAX_MESSAGE_GROUP_BYTES = 64
MAX_DELAY_MS = 24 * 3600 * 1000
MAX_TRANSACTION_RECOVERY_S = 3600

Code = pb.Code


class Refused(Exception):
    """A request refused with a status: its ``code`` (``pb.Code``) and message."""

    def __init__(self, code: int, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason  # the rejection metric's label ("": grpc_<code name>)


def status(code: int, message: str = "OK") -> Any:
    return pb.Status(code=code, message=message)


def check_topic(name: str) -> str:
    """A topic a client names, or ``Refused`` ILLEGAL_TOPIC (a 5.x Proxy's words)."""
    if not name.strip():
        raise Refused(Code.ILLEGAL_TOPIC, "The specified topic is blank")
    problem = check_topic_name(name)
    if problem is not None:
        raise Refused(Code.ILLEGAL_TOPIC, problem)
    if name in SYSTEM_TOPICS or name.startswith(("rmq_sys_", "RMQ_SYS_")):
        raise Refused(Code.ILLEGAL_TOPIC, f"cannot access system topic: {name}")
    return name


def check_group(name: str) -> str:
    """A consumer group a client names, or ``Refused`` ILLEGAL_CONSUMER_GROUP."""
    if not name.strip():
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    problem = check_group_name(name)
    if problem is not None:
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, problem)
    if name.startswith(("CID_RMQ_SYS_", "CID_ONSAPI_")) or name.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group: {name}")
    return name


def _control(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


@dataclasses.dataclass
class Outgoing:
    """One message of a SendMessage, checked and with its properties as it will be stored."""

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    message_group: str
    delivery_ms: int | None
    transactional: bool
    message_id: str


def outgoing(message: Any, *, max_body: int, remote: str, now_ms: int) -> Outgoing:
    """The checked form of one ``pb.Message`` of a send (``Refused`` with the reference's code)."""
    sp = message.system_properties
    body = message.body
    if not body:
        raise Refused(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > max_body:
        raise Refused(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_body}")
    user = dict(message.user_properties)
    if len(user) > MAX_USER_PROPERTIES:
        raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}")
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_KEYS:
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _control(key):
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        if _control(value):
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character")
        if "\x01" in key or "\x02" in key:
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        size += len(key.encode()) + len(value.encode())
    properties = user
    tag = sp.tag if sp.HasField("tag") else ""
    if tag:
        if not tag.strip():
            raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if _control(tag):
            raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")
        properties["TAGS"] = tag
        size += len(tag.encode())
    keys = list(sp.keys)
    for key in keys:
        if key and not key.strip():
            raise Refused(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if _control(key):
            raise Refused(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")
        size += len(key.encode())
    if keys:
        properties["KEYS"] = " ".join(keys)
    if size > MAX_USER_PROPERTY_BYTES:
        raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                      f"the total size of user property is too large, max is {MAX_USER_PROPERTY_BYTES}")  # fmt: skip
    if not sp.message_id.strip():
        raise Refused(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    properties["UNIQ_KEY"] = sp.message_id
    sys_flag = COMPRESSED_FLAG if sp.body_encoding == pb.GZIP else 0
    transactional = sp.message_type == pb.TRANSACTION
    if transactional:
        properties["TRAN_MSG"] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            if seconds > MAX_TRANSACTION_RECOVERY_S:
                raise Refused(Code.BAD_REQUEST, "the max transaction recovery time of message is too large, max is "
                              f"{MAX_TRANSACTION_RECOVERY_S}")  # fmt: skip
            properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] = str(seconds)
    delivery_ms = None
    if sp.HasField("delivery_timestamp"):
        delivery_ms = sp.delivery_timestamp.ToMilliseconds()
        if delivery_ms - now_ms > MAX_DELAY_MS:
            raise Refused(Code.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {MAX_DELAY_MS}")
        properties["TIMER_DELIVER_MS"] = str(delivery_ms)
    properties["RECONSUME_TIME"] = str(sp.delivery_attempt)
    group = sp.message_group if sp.HasField("message_group") else ""
    if group:
        if not group.strip():
            raise Refused(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES:
            raise Refused(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {MAX_MESSAGE_GROUP_BYTES}")
        if _control(group):
            raise Refused(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
        properties["__SHARDINGKEY"] = group
    if sp.trace_context:
        properties["TRACE_CONTEXT"] = sp.trace_context
    properties["__BORNHOST"] = sp.born_host if sp.born_host.strip() else remote
    born = sp.born_timestamp.ToMilliseconds() if sp.HasField("born_timestamp") else now_ms
    properties["BORN_TIMESTAMP"] = str(born)
    return Outgoing(message.topic.name, body, properties, sys_flag, born, group, delivery_ms, transactional,
                    sp.message_id)  # fmt: skip


def message_type_of(properties: dict[str, str]) -> str:
    """A message's 5.x type from its properties (``TopicMessageType.parseFromMessageProperty``)."""
    if properties.get("TRAN_MSG") == "true":
        return "TRANSACTION"
    if not {"DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"}.isdisjoint(properties):
        return "DELAY"
    if "__SHARDINGKEY" in properties:
        return "FIFO"
    return "NORMAL"


_TYPES = {"NORMAL": pb.NORMAL, "FIFO": pb.FIFO, "DELAY": pb.DELAY, "TRANSACTION": pb.TRANSACTION}


def to_wire(message: Message, *, attempt: int, handle: str = "", invisible_ms: int = 0) -> Any:
    """A stored message as a 5.x client receives it (``GrpcConverter.buildMessage``'s fields)."""
    props = message.properties
    out = pb.Message()
    out.topic.name = message.topic
    for key, value in props.items():
        if key not in _HIDDEN:
            out.user_properties[key] = value
    out.body = message.body
    sp = out.system_properties
    tag = props.get("TAGS")
    if tag is not None:
        sp.tag = tag
    keys = props.get("KEYS")
    if keys:
        sp.keys.extend(k for k in keys.split(" ") if k)
    sp.message_id = message.msg_id
    sp.body_digest.type = pb.MD5
    sp.body_digest.checksum = hashlib.md5(message.body).hexdigest().upper()
    sp.body_encoding = pb.GZIP if message.sys_flag & COMPRESSED_FLAG else pb.IDENTITY
    sp.message_type = _TYPES[message_type_of(props)]
    sp.born_timestamp.FromMilliseconds(message.born_timestamp)
    sp.born_host = props.get("__BORNHOST") or f"{message.born_host[0]}:{message.born_host[1]}"
    sp.store_timestamp.FromMilliseconds(message.store_timestamp)
    sp.store_host = f"{message.store_host[0]}:{message.store_host[1]}"
    deliver = props.get("TIMER_DELIVER_MS")
    if deliver is not None and deliver.lstrip("-").isdigit():
        sp.delivery_timestamp.FromMilliseconds(int(deliver))
    group = props.get("__SHARDINGKEY")
    if group is not None:
        sp.message_group = group
    if handle:
        sp.receipt_handle = handle
        sp.invisible_duration.FromMilliseconds(invisible_ms)
    sp.queue_id = message.queue_id
    sp.queue_offset = message.queue_offset
    sp.delivery_attempt = attempt
    trace = props.get("TRACE_CONTEXT")
    if trace is not None:
        sp.trace_context = trace
    origin = props.get("DLQ_ORIGIN_TOPIC")
    if origin is not None:
        sp.dead_letter_queue.topic = origin
        sp.dead_letter_queue.message_id = props.get("DLQ_ORIGIN_MESSAGE_ID", "")
    return out
