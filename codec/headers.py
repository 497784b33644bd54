"""Typed custom headers: one declarative table per Java header class, one generic converter.

A RocketMQ request or response carries its typed header as ``extFields``, a string map: each
non-null field as name → ``toString()`` (docs/protocol.md, Headers). Each header class below is declared as
data — Java class name, then ``name:TYPE`` per field with ``!`` for ``@CFNotNull`` and
``=default`` for Java primitives (always sent) — and becomes a frozen dataclass with snake_case
attributes. :class:`HeaderCodec` converts between the dataclass and extFields; the per-code tables
``REQUEST_HEADERS``/``RESPONSE_HEADERS`` say which class each request code uses.

Facts behind the tables (apache/rocketmq 4.9.8 and 5.3.3, read off the released jars):
- Fields come from the class and all its superclasses; ``RpcRequestHeader`` adds ``bname`` (4.9.8)
  and 5.x adds ``lo``, ``ns``, ``nsd``, ``oway``. We accept them all and never require them.
- Four classes are ``FastCodesHeader`` (hand-written codec): ``SendMessageRequestHeaderV2``,
  ``SendMessageResponseHeader``, ``PullMessageRequestHeader``, ``PullMessageResponseHeader``. In
  ROCKETMQ serialization Java writes their fields first, in declaration order, then any other
  ext fields in HashMap order; every other header is written wholly in HashMap order.
- HashMap order breaks bucket ties by insertion order, and Java inserts header fields in
  ``HashSet<Field>`` order (``Field.hashCode`` = declaring class name hash XOR field name hash).
  We emulate 4.9.8's classes, so what we write is byte-identical to a 4.9.8 peer; a 5.x peer
  writes the same keys and values, ties broken by its own reflection.
- SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry ``SendMessageRequestHeader`` under the one-letter
  names ``a``..``n``; here both decode to the same ``SendMessageRequestHeader`` value.
- Java only logs a missing ``@CFNotNull`` field or an unparsable number and leaves the field
  unset (its fast path lets the NumberFormatException escape as SYSTEM_ERROR). We raise
  ``CustomHeaderError`` for both, which a server answers SYSTEM_ERROR with a remark naming the
  field: a clear error instead of a null deep in a processor. Unknown keys are ignored.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from .codes import RequestCode
from .errors import CustomHeaderError
from .javacompat import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    hash_order,
    hashmap_order,
    java_bool,
    java_int,
    java_str,
    string_hash,
)

#: Java integer types by letter: their range, and the digit count below which plain ASCII digits
#: always fit (``decode`` reads those with ``int`` and leaves the rest to ``java_int``).
_INT_RANGES = {"I": (INT32_MIN, INT32_MAX), "L": (INT64_MIN, INT64_MAX)}
_SHORT = {kind: len(str(hi)) for kind, (_, hi) in _INT_RANGES.items()}
_PARSERS: dict[str, Callable[[str], Any] | None] = {
    "S": None,  # kept as sent
    "B": java_bool,
    **{kind: functools.partial(java_int, lo=lo, hi=hi) for kind, (lo, hi) in _INT_RANGES.items()},
}
_PY_TYPES = {"S": str, "I": int, "L": int, "B": bool}
_DEFAULTS = {"false": False, "true": True, "0": 0}


@dataclasses.dataclass(frozen=True)
class HField:
    """One header field: wire name, attribute, Java type letter (S, I, L, B), required, default."""

    wire: str
    attr: str
    type: str
    required: bool
    default: Any = None
    only_5x: bool = False
    declared_in: str = ""


def snake(name: str) -> str:
    """Attribute name for a Java field name: ``queueId`` → ``queue_id``, ``clientID`` → ``client_id``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _parse_spec(spec: str, leaf_class: str) -> tuple[HField, ...]:
    fields = []
    for item in spec.split():
        name, _, rest = item.partition(":")
        declared_in = _RPC_CLASS_49 if rest.endswith("@") else leaf_class
        kind, _, default = rest.rstrip("@^").replace("!", "").partition("=")
        default_value = _DEFAULTS[default] if default else None
        fields.append(HField(name, snake(name), kind, "!" in rest, default_value, "^" in rest, declared_in))
    return tuple(fields)


def _hashset_order(fields: tuple[HField, ...]) -> tuple[HField, ...]:
    """4.9.8 ``getClazzFields`` order: a ``HashSet<Field>`` filled leaf class first, where
    ``Field.hashCode`` is the declaring class name's hash XOR the field name's hash."""
    present = [f for f in fields if not f.only_5x]
    present.sort(key=lambda f: f.declared_in == _RPC_CLASS_49)  # superclass fields come last
    return tuple(hash_order(present, lambda f: string_hash(f.declared_in) ^ string_hash(f.wire)))


class Header:
    """Base of generated header dataclasses; ``CODEC`` converts to and from extFields."""

    CODEC: ClassVar[HeaderCodec]

    @classmethod
    def from_ext(cls, ext: Mapping[str, str] | None) -> Header:
        return cls.CODEC.decode(ext)

    def to_ext(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return self.CODEC.encode(self, extra)


class HeaderCodec:
    """extFields ⇄ typed header for one wire layout of a header class."""

    def __init__(self, cls: type[Header], fields: tuple[HField, ...], *, fast: bool, java_name: str) -> None:
        self.cls = cls
        self.fields = fields
        self.fast = fast
        self.java_name = java_name
        # Fast headers write declaration order; the others insert into the HashMap in the order
        # Java's reflection yields (5.x-only fields, absent in 4.9.8, go last).
        self._write_order = fields if fast else _hashset_order(fields) + tuple(f for f in fields if f.only_5x)
        self._plan = tuple((f.wire, f.attr, _PARSERS[f.type], _SHORT.get(f.type, 0), f.required, f) for f in fields)
        self._defaults = {f.attr: f.default for f in fields}
        self._encode_plan = tuple((f.wire, f.attr) for f in self._write_order)

    def decode(self, ext: Mapping[str, str] | None) -> Any:
        """Typed header from extFields; CustomHeaderError on a missing required or bad value.
        Every request runs this, so the loop is flat and the frozen instance is filled directly
        (its ``__init__`` pays ``object.__setattr__`` per field: half the cost of a send header)."""
        ext = ext or {}
        values = self._defaults.copy()
        for wire, attr, parse, short, required, f in self._plan:
            text = ext.get(wire)
            if text is None:
                if required:
                    raise CustomHeaderError(f"the custom field <{wire}> is null", where=self.java_name)
            elif parse is None:
                values[attr] = text
            elif len(text) < short and text.isdigit() and text.isascii():
                values[attr] = int(text)  # most fields are short numbers: no call for them
            else:
                try:
                    values[attr] = parse(text)
                except ValueError:
                    raise CustomHeaderError(
                        f"the custom field <{wire}> has {text!r:.40}, not a {_PY_TYPES[f.type].__name__}",
                        where=self.java_name,
                    ) from None
        return self._instance(values)

    def make(self, **values: Any) -> Any:
        """The typed header of these field values, filled as ``decode`` fills it: the answers to
        sends and pulls build one each, and the frozen ``__init__`` would double that cost."""
        if not values.keys() <= self._defaults.keys():
            raise TypeError(f"{self.java_name} has no field {sorted(values.keys() - self._defaults.keys())}")
        return self._instance({**self._defaults, **values})

    def _instance(self, values: dict[str, Any]) -> Any:
        """The frozen header whose ``__dict__`` is ``values`` (every field), without ``__init__``."""
        header = object.__new__(self.cls)
        object.__setattr__(header, "__dict__", values)
        return header

    def encode(self, header: Any, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """extFields for ``header`` in Java's ROCKETMQ write order (see the module doc);
        ``extra`` are keys Java adds with ``addExtField`` (e.g. MSG_REGION). Every answer to a
        send or pull runs this, so it reads the instance's ``__dict__`` along a precomputed plan."""
        values = header.__dict__
        own = {}
        for wire, attr in self._encode_plan:
            value = values[attr]
            if value is not None:
                own[wire] = value if value.__class__ is str else java_str(value)
        if self.fast:
            if extra:
                for key in hashmap_order(extra):
                    own[key] = extra[key]
            return own
        merged = {**extra, **own} if extra else own
        return {k: merged[k] for k in hashmap_order(merged)}


def _define(java_name: str, spec: str, *, fast: bool = False, namesrv: bool = False) -> type[Header]:
    fields = _parse_spec(spec, f"{_HEADER_PACKAGE_49}{'.namesrv' if namesrv else ''}.{java_name}")
    cls = dataclasses.make_dataclass(
        java_name,
        [(f.attr, _PY_TYPES[f.type] | None, dataclasses.field(default=f.default)) for f in fields],
        bases=(Header,),
        frozen=True,
    )
    cls.__module__ = __name__
    cls.__doc__ = f"Java ``{java_name}``: " + ", ".join(f.wire + ("!" if f.required else "") for f in fields)
    cls.CODEC = HeaderCodec(cls, fields, fast=fast, java_name=java_name)
    return cls


# Spec markers: "!" @CFNotNull, "=v" a Java primitive with its default, "^" only in 5.x, "@" declared
# in 4.9.8's RpcRequestHeader. Superclass fields: RpcRequestHeader (bname, in 4.9.8 only for the
# classes extending it; ns, nsd, oway in 5.x) and 5.x TopicRequestHeader (lo).
_HEADER_PACKAGE_49 = "org.apache.rocketmq.common.protocol.header"
_RPC_CLASS_49 = "org.apache.rocketmq.common.rpc.RpcRequestHeader"
_RPC = " ns:S^ nsd:B^ bname:S^ oway:B^"
_TOPIC_RPC = " lo:B^" + _RPC
_RPC_49 = " ns:S^ nsd:B^ bname:S@ oway:B^"
_TOPIC_RPC_49 = " lo:B^" + _RPC_49

SendMessageRequestHeader = _define(
    "SendMessageRequestHeader",
    "producerGroup:S! topic:S! defaultTopic:S! defaultTopicQueueNums:I! queueId:I! sysFlag:I! bornTimestamp:L! "
    "flag:I! properties:S reconsumeTimes:I unitMode:B=false batch:B=false maxReconsumeTimes:I" + _TOPIC_RPC_49,
)
SendMessageResponseHeader = _define(
    "SendMessageResponseHeader",
    "msgId:S! queueId:I! queueOffset:L! transactionId:S batchUniqId:S^ recallHandle:S^",
    fast=True,
)
PullMessageRequestHeader = _define(
    "PullMessageRequestHeader",
    "consumerGroup:S! topic:S! queueId:I! queueOffset:L! maxMsgNums:I! sysFlag:I! commitOffset:L! "
    "suspendTimeoutMillis:L! subscription:S subVersion:L! expressionType:S maxMsgBytes:I^ requestSource:I^ "
    "proxyFrowardClientId:S^" + _TOPIC_RPC_49,
    fast=True,
)
PullMessageResponseHeader = _define(
    "PullMessageResponseHeader",
    "suggestWhichBrokerId:L! nextBeginOffset:L! minOffset:L! maxOffset:L! offsetDelta:L^ topicSysFlag:I^ "
    "groupSysFlag:I^ forbiddenType:I^",
    fast=True,
)
QueryMessageRequestHeader = _define(
    "QueryMessageRequestHeader", "topic:S! key:S! maxNum:I! beginTimestamp:L! endTimestamp:L!" + _TOPIC_RPC
)
QueryMessageResponseHeader = _define(
    "QueryMessageResponseHeader", "indexLastUpdateTimestamp:L! indexLastUpdatePhyoffset:L!"
)
QueryConsumerOffsetRequestHeader = _define(
    "QueryConsumerOffsetRequestHeader", "consumerGroup:S! topic:S! queueId:I! setZeroIfNotFound:B^" + _TOPIC_RPC_49
)
QueryConsumerOffsetResponseHeader = _define("QueryConsumerOffsetResponseHeader", "offset:L!")
UpdateConsumerOffsetRequestHeader = _define(
    "UpdateConsumerOffsetRequestHeader", "consumerGroup:S! topic:S! queueId:I! commitOffset:L!" + _TOPIC_RPC_49
)
UpdateConsumerOffsetResponseHeader = _define("UpdateConsumerOffsetResponseHeader", "")
CreateTopicRequestHeader = _define(
    "CreateTopicRequestHeader",
    "topic:S! defaultTopic:S! readQueueNums:I! writeQueueNums:I! perm:I! topicFilterType:S! topicSysFlag:I "
    "order:B! attributes:S^ force:B^" + _TOPIC_RPC,
)
GetBrokerConfigResponseHeader = _define("GetBrokerConfigResponseHeader", "version:S!")
SearchOffsetRequestHeader = _define(
    "SearchOffsetRequestHeader", "topic:S! queueId:I! timestamp:L! boundaryType:S^" + _TOPIC_RPC_49
)
SearchOffsetResponseHeader = _define("SearchOffsetResponseHeader", "offset:L!")
GetMaxOffsetRequestHeader = _define("GetMaxOffsetRequestHeader", "topic:S! queueId:I! committed:B^" + _TOPIC_RPC_49)
GetMaxOffsetResponseHeader = _define("GetMaxOffsetResponseHeader", "offset:L!")
GetMinOffsetRequestHeader = _define("GetMinOffsetRequestHeader", "topic:S! queueId:I!" + _TOPIC_RPC_49)
GetMinOffsetResponseHeader = _define("GetMinOffsetResponseHeader", "offset:L!")
GetEarliestMsgStoretimeRequestHeader = _define(
    "GetEarliestMsgStoretimeRequestHeader", "topic:S! queueId:I!" + _TOPIC_RPC_49
)
GetEarliestMsgStoretimeResponseHeader = _define("GetEarliestMsgStoretimeResponseHeader", "timestamp:L!")
ViewMessageRequestHeader = _define("ViewMessageRequestHeader", "topic:S^ offset:L!")
HeartbeatRequestHeader = _define("HeartbeatRequestHeader", _RPC)
UnregisterClientRequestHeader = _define(
    "UnregisterClientRequestHeader", "clientID:S! producerGroup:S consumerGroup:S" + _RPC
)
UnregisterClientResponseHeader = _define("UnregisterClientResponseHeader", "")
ConsumerSendMsgBackRequestHeader = _define(
    "ConsumerSendMsgBackRequestHeader",
    "offset:L! group:S! delayLevel:I! originMsgId:S originTopic:S unitMode:B=false maxReconsumeTimes:I" + _RPC_49,
)
ReplyMessageRequestHeader = _define(
    "ReplyMessageRequestHeader",
    "producerGroup:S! topic:S! defaultTopic:S! defaultTopicQueueNums:I! queueId:I! sysFlag:I! bornTimestamp:L! "
    "flag:I! properties:S reconsumeTimes:I unitMode:B=false bornHost:S! storeHost:S! storeTimestamp:L!" + _TOPIC_RPC,
)
EndTransactionRequestHeader = _define(
    "EndTransactionRequestHeader",
    "topic:S^ producerGroup:S! tranStateTableOffset:L! commitLogOffset:L! commitOrRollback:I! "
    "fromTransactionCheck:B msgId:S! transactionId:S" + _RPC_49,
)
GetConsumerListByGroupRequestHeader = _define("GetConsumerListByGroupRequestHeader", "consumerGroup:S!" + _RPC)
GetConsumerListByGroupResponseHeader = _define("GetConsumerListByGroupResponseHeader", "")
CheckTransactionStateRequestHeader = _define(
    "CheckTransactionStateRequestHeader",
    "topic:S^ tranStateTableOffset:L! commitLogOffset:L! msgId:S transactionId:S offsetMsgId:S" + _RPC_49,
)
NotifyConsumerIdsChangedRequestHeader = _define("NotifyConsumerIdsChangedRequestHeader", "consumerGroup:S!" + _RPC)
LockBatchMqRequestHeader = _define("LockBatchMqRequestHeader", _RPC)
UnlockBatchMqRequestHeader = _define("UnlockBatchMqRequestHeader", _RPC)
GetKVConfigRequestHeader = _define("GetKVConfigRequestHeader", "namespace:S! key:S!", namesrv=True)
GetKVConfigResponseHeader = _define("GetKVConfigResponseHeader", "value:S", namesrv=True)
PutKVConfigRequestHeader = _define("PutKVConfigRequestHeader", "namespace:S! key:S! value:S!", namesrv=True)
DeleteKVConfigRequestHeader = _define("DeleteKVConfigRequestHeader", "namespace:S! key:S!", namesrv=True)
GetKVListByNamespaceRequestHeader = _define("GetKVListByNamespaceRequestHeader", "namespace:S!", namesrv=True)
RegisterBrokerRequestHeader = _define(
    "RegisterBrokerRequestHeader",
    "brokerName:S! brokerAddr:S! clusterName:S! haServerAddr:S! brokerId:L! heartbeatTimeoutMillis:L^ "
    "enableActingMaster:B^ compressed:B=false bodyCrc32:I", namesrv=True)
RegisterBrokerResponseHeader = _define("RegisterBrokerResponseHeader", "haServerAddr:S masterAddr:S", namesrv=True)
UnRegisterBrokerRequestHeader = _define(
    "UnRegisterBrokerRequestHeader", "brokerName:S! brokerAddr:S! clusterName:S! brokerId:L!", namesrv=True)
GetRouteInfoRequestHeader = _define(
    "GetRouteInfoRequestHeader", "topic:S! acceptStandardJsonOnly:B" + _TOPIC_RPC, namesrv=True
)
GetTopicStatsInfoRequestHeader = _define("GetTopicStatsInfoRequestHeader", "topic:S!" + _TOPIC_RPC)
GetConsumerConnectionListRequestHeader = _define("GetConsumerConnectionListRequestHeader", "consumerGroup:S!" + _RPC)
GetConsumeStatsRequestHeader = _define(
    "GetConsumeStatsRequestHeader", "consumerGroup:S! topic:S topicList:S^" + _TOPIC_RPC
)
DeleteTopicRequestHeader = _define("DeleteTopicRequestHeader", "topic:S!" + _TOPIC_RPC)
DeleteTopicFromNamesrvRequestHeader = _define(
    "DeleteTopicFromNamesrvRequestHeader", "topic:S! clusterName:S" + _TOPIC_RPC, namesrv=True)
WipeWritePermOfBrokerRequestHeader = _define("WipeWritePermOfBrokerRequestHeader", "brokerName:S!", namesrv=True)
WipeWritePermOfBrokerResponseHeader = _define("WipeWritePermOfBrokerResponseHeader", "wipeTopicCount:I!", namesrv=True)
AddWritePermOfBrokerRequestHeader = _define("AddWritePermOfBrokerRequestHeader", "brokerName:S!", namesrv=True)
AddWritePermOfBrokerResponseHeader = _define("AddWritePermOfBrokerResponseHeader", "addTopicCount:I!", namesrv=True)
GetTopicsByClusterRequestHeader = _define("GetTopicsByClusterRequestHeader", "cluster:S!")
QueryTopicConsumeByWhoRequestHeader = _define("QueryTopicConsumeByWhoRequestHeader", "topic:S!" + _TOPIC_RPC)
GetTopicConfigRequestHeader = _define("GetTopicConfigRequestHeader", "topic:S!" + _TOPIC_RPC)
ResetOffsetRequestHeader = _define(
    "ResetOffsetRequestHeader", "topic:S! group:S! queueId:I^ offset:L^ timestamp:L! isForce:B!" + _TOPIC_RPC
)
GetConsumerStatusRequestHeader = _define(
    "GetConsumerStatusRequestHeader", "topic:S! group:S! clientAddr:S" + _TOPIC_RPC
)
ConsumeMessageDirectlyResultRequestHeader = _define(
    "ConsumeMessageDirectlyResultRequestHeader",
    "consumerGroup:S! clientId:S msgId:S brokerName:S topic:S^ topicSysFlag:I^ groupSysFlag:I^" + _TOPIC_RPC,
)
GetProducerConnectionListRequestHeader = _define("GetProducerConnectionListRequestHeader", "producerGroup:S!" + _RPC)
CloneGroupOffsetRequestHeader = _define(
    "CloneGroupOffsetRequestHeader", "srcGroup:S! destGroup:S! topic:S offline:B=false" + _RPC
)
QueryConsumeQueueRequestHeader = _define(
    "QueryConsumeQueueRequestHeader", "topic:S queueId:I=0 index:L=0 count:I=0 consumerGroup:S" + _TOPIC_RPC
)
ViewBrokerStatsDataRequestHeader = _define("ViewBrokerStatsDataRequestHeader", "statsName:S! statsKey:S!")
GetConsumeStatsInBrokerHeader = _define("GetConsumeStatsInBrokerHeader", "isOrder:B!=false")
DeleteSubscriptionGroupRequestHeader = _define(
    "DeleteSubscriptionGroupRequestHeader", "groupName:S! removeOffset:B cleanOffset:B^" + _RPC
)
GetSubscriptionGroupConfigRequestHeader = _define("GetSubscriptionGroupConfigRequestHeader", "group:S!" + _RPC)
GetConsumerRunningInfoRequestHeader = _define(
    "GetConsumerRunningInfoRequestHeader", "consumerGroup:S! clientId:S! jstackEnable:B=false" + _RPC
)

#: SendMessageRequestHeader field → SendMessageRequestHeaderV2 wire name (``n`` carries bname).
SEND_V2_NAMES = {
    "producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
    "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j",
    "unitMode": "k", "maxReconsumeTimes": "l", "batch": "m", "bname": "n",
}  # fmt: skip

#: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE layout: the V1 header under one-letter names. Its fast codec
#: never writes the other superclass fields, so neither do we.
SEND_V2 = HeaderCodec(
    SendMessageRequestHeader,
    tuple(
        dataclasses.replace(f, wire=SEND_V2_NAMES[f.wire])
        for f in sorted(
            (f for f in SendMessageRequestHeader.CODEC.fields if f.wire in SEND_V2_NAMES),
            key=lambda f: SEND_V2_NAMES[f.wire],
        )
    ),
    fast=True,
    java_name="SendMessageRequestHeaderV2",
)

_C = RequestCode

#: Request code → codec of its request header (codes absent here carry none).
REQUEST_HEADERS: dict[int, HeaderCodec] = {
    _C.SEND_MESSAGE: SendMessageRequestHeader.CODEC,
    _C.PULL_MESSAGE: PullMessageRequestHeader.CODEC,
    _C.LITE_PULL_MESSAGE: PullMessageRequestHeader.CODEC,
    _C.QUERY_MESSAGE: QueryMessageRequestHeader.CODEC,
    _C.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader.CODEC,
    _C.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader.CODEC,
    _C.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader.CODEC,
    _C.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader.CODEC,
    _C.GET_MAX_OFFSET: GetMaxOffsetRequestHeader.CODEC,
    _C.GET_MIN_OFFSET: GetMinOffsetRequestHeader.CODEC,
    _C.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader.CODEC,
    _C.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader.CODEC,
    _C.HEART_BEAT: HeartbeatRequestHeader.CODEC,
    _C.UNREGISTER_CLIENT: UnregisterClientRequestHeader.CODEC,
    _C.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader.CODEC,
    _C.END_TRANSACTION: EndTransactionRequestHeader.CODEC,
    _C.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader.CODEC,
    _C.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader.CODEC,
    _C.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader.CODEC,
    _C.LOCK_BATCH_MQ: LockBatchMqRequestHeader.CODEC,
    _C.UNLOCK_BATCH_MQ: UnlockBatchMqRequestHeader.CODEC,
    _C.GET_KV_CONFIG: GetKVConfigRequestHeader.CODEC,
    _C.PUT_KV_CONFIG: PutKVConfigRequestHeader.CODEC,
    _C.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader.CODEC,
    _C.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader.CODEC,
    _C.REGISTER_BROKER: RegisterBrokerRequestHeader.CODEC,
    _C.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader.CODEC,
    _C.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader.CODEC,
    _C.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader.CODEC,
    _C.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader.CODEC,
    _C.GET_CONSUME_STATS: GetConsumeStatsRequestHeader.CODEC,
    _C.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader.CODEC,
    _C.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader.CODEC,
    _C.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader.CODEC,
    _C.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader.CODEC,
    _C.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader.CODEC,
    _C.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader.CODEC,
    _C.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader.CODEC,
    _C.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader.CODEC,
    _C.GET_BROKE_CONSUME_STATS: GetConsumeStatsInBrokerHeader.CODEC,
    _C.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader.CODEC,
    _C.GET_CONSUMER_STATUS_FROM_CLIENT: GetConsumerStatusRequestHeader.CODEC,
    _C.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader.CODEC,
    _C.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader.CODEC,
    _C.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader.CODEC,
    _C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader.CODEC,
    _C.CLONE_GROUP_OFFSET: CloneGroupOffsetRequestHeader.CODEC,
    _C.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader.CODEC,
    _C.GET_TOPIC_CONFIG: GetTopicConfigRequestHeader.CODEC,
    _C.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader.CODEC,
    _C.GET_SUBSCRIPTIONGROUP_CONFIG: GetSubscriptionGroupConfigRequestHeader.CODEC,
    _C.SEND_MESSAGE_V2: SEND_V2,
    _C.SEND_BATCH_MESSAGE: SEND_V2,
    _C.SEND_REPLY_MESSAGE: SendMessageRequestHeader.CODEC,
    _C.SEND_REPLY_MESSAGE_V2: SEND_V2,
    _C.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader.CODEC,
}

#: Request code → codec of the header its SUCCESS response carries.
RESPONSE_HEADERS: dict[int, HeaderCodec] = {
    _C.SEND_MESSAGE: SendMessageResponseHeader.CODEC,
    _C.SEND_MESSAGE_V2: SendMessageResponseHeader.CODEC,
    _C.SEND_BATCH_MESSAGE: SendMessageResponseHeader.CODEC,
    _C.PULL_MESSAGE: PullMessageResponseHeader.CODEC,
    _C.LITE_PULL_MESSAGE: PullMessageResponseHeader.CODEC,
    _C.QUERY_MESSAGE: QueryMessageResponseHeader.CODEC,
    _C.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader.CODEC,
    _C.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetResponseHeader.CODEC,
    _C.GET_BROKER_CONFIG: GetBrokerConfigResponseHeader.CODEC,
    _C.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetResponseHeader.CODEC,
    _C.GET_MAX_OFFSET: GetMaxOffsetResponseHeader.CODEC,
    _C.GET_MIN_OFFSET: GetMinOffsetResponseHeader.CODEC,
    _C.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeResponseHeader.CODEC,
    _C.UNREGISTER_CLIENT: UnregisterClientResponseHeader.CODEC,
    _C.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupResponseHeader.CODEC,
    _C.GET_KV_CONFIG: GetKVConfigResponseHeader.CODEC,
    _C.REGISTER_BROKER: RegisterBrokerResponseHeader.CODEC,
    _C.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerResponseHeader.CODEC,
    _C.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerResponseHeader.CODEC,
}

#: Every header class, by Java name (for the oracle tests and tools).
HEADER_CLASSES: dict[str, type[Header]] = {
    name: obj
    for name, obj in dict(globals()).items()
    if isinstance(obj, type) and issubclass(obj, Header) and obj is not Header
}


def decode_request_header(code: int, ext: Mapping[str, str] | None) -> Any:
    """Typed header of a request with ``code``, or None when that code carries none (or is unknown)."""
    codec = REQUEST_HEADERS.get(code)
    return codec.decode(ext) if codec is not None else None

