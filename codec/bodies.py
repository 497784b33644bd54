"""Typed JSON bodies in the Java client's dialect: heartbeat, lock batch, route data, consumer
list, cluster info, topic/group lists, offsets and stats, consumer connection and running info,
offset resets, consumer status, producer connections and consume-queue views.

Each body is a dataclass whose fields are declared with :func:`jfield` (JSON name, kind): the
table is the spec and one generic loader/dumper serves every class, as the header tables do.
Loading is lenient where Java is (unknown keys ignored, numbers in strings coerced, missing
fields default) and strict where a wrong type would mislead us (``BodyError`` names the path).
Dumping writes what fastjson writes for the Java class: properties alphabetically, nulls
omitted, ``HashSet``/``HashMap`` contents in Java iteration order (``TreeMap`` fields sorted),
compact; ``standard=True`` is the broker's standard-JSON route form (quoted and sorted map keys,
non-ASCII escaped: ``BrowserCompatible``, ``QuoteFieldNames``, ``MapSortField``).
Class names are the Java ones so the oracle tests and a grep line up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from .errors import BodyError
from .javacompat import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, hash_order, java_str, object_hash, string_hash
from .jsonjava import ObjectKey, dumps, loads

B = TypeVar("B", bound="Body")


class Kind:
    """How one JSON value maps to a Python value (``load``) and back (``dump``)."""

    def load(self, value: Any, path: str) -> Any:
        raise NotImplementedError

    def dump(self, value: Any, standard: bool) -> Any:
        return value

    def java_hash(self, value: Any) -> int | None:
        """The Java ``hashCode`` of a value, if this kind's values go into hash sets/maps."""
        return None


class _Str(Kind):
    def load(self, value: Any, path: str) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)):  # fastjson coerces scalars into String properties
            return java_str(value)
        raise BodyError(f"{path}: expected a string, got {type(value).__name__}")

    def java_hash(self, value: Any) -> int:
        return string_hash(value)


class _Int(Kind):
    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def load(self, value: Any, path: str) -> int:
        if isinstance(value, str) and len(value) <= 20 and value.isascii() and value.lstrip("-").isdigit():
            value = int(value)  # fastjson coerces numeric strings (and quoted map keys)
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise BodyError(f"{path}: expected an integer in [{self.lo}, {self.hi}], got {value!r:.40}")
        return value

    def java_hash(self, value: Any) -> int:
        return object_hash(value)


class _Bool(Kind):
    def load(self, value: Any, path: str) -> bool:
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise BodyError(f"{path}: expected a boolean, got {value!r:.40}")


class _Double(Kind):
    def load(self, value: Any, path: str) -> float:
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BodyError(f"{path}: expected a number, got {value!r:.40}")
        return float(value)


STR: Kind = _Str()
INT: Kind = _Int(INT32_MIN, INT32_MAX)
LONG: Kind = _Int(INT64_MIN, INT64_MAX)
BOOL: Kind = _Bool()
DOUBLE: Kind = _Double()


class ListOf(Kind):
    """Java ``List``: order kept."""

    def __init__(self, item: Kind) -> None:
        self.item = item

    def load(self, value: Any, path: str) -> list:
        if not isinstance(value, list):
            raise BodyError(f"{path}: expected an array, got {type(value).__name__}")
        return [self.item.load(v, f"{path}[{i}]") for i, v in enumerate(value)]

    def dump(self, value: Any, standard: bool) -> list:
        return [self.item.dump(v, standard) for v in value]


class SetOf(ListOf):
    """Java ``HashSet``: loaded in wire order without duplicates; dumped in HashSet order."""

    def load(self, value: Any, path: str) -> list:
        items = super().load(value, path)
        try:
            return list(dict.fromkeys(items))
        except TypeError:  # unhashable members (nested bodies with lists): keep as sent
            return items

    def dump(self, value: Any, standard: bool) -> list:
        if value and self.item.java_hash(value[0]) is not None:
            value = hash_order(value, self.item.java_hash)
        return [self.item.dump(v, standard) for v in value]


class MapOf(Kind):
    """Java ``Map``: ``sorted_keys`` for TreeMap fields, else HashMap order (sorted in standard)."""

    def __init__(self, key: Kind, value: Kind, *, sorted_keys: bool = False) -> None:
        self.key, self.value, self.sorted_keys = key, value, sorted_keys

    def load(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            raise BodyError(f"{path}: expected an object, got {type(value).__name__}")
        return {self.key.load(k, f"{path}<key>"): self.value.load(v, f"{path}[{k!r:.40}]") for k, v in value.items()}

    def dump(self, value: Any, standard: bool) -> dict:
        keys = list(value)
        if self.sorted_keys or standard:
            keys.sort()
        elif keys and self.key.java_hash(keys[0]) is not None:
            keys = hash_order(keys, self.key.java_hash)
        return {self.key.dump(k, standard): self.value.dump(value[k], standard) for k in keys}


class LongKey(_Int):
    """A ``Long`` map key: bare (``{0:…}``) or quoted (``{"0":…}``) on the wire."""

    def __init__(self) -> None:
        super().__init__(INT64_MIN, INT64_MAX)


class Nested(Kind):
    """A nested body class."""

    def __init__(self, cls: type[Body]) -> None:
        self.cls = cls

    def load(self, value: Any, path: str) -> Body:
        if isinstance(value, ObjectKey):
            value = value.as_dict()
        return self.cls.load(value, path)

    def dump(self, value: Any, standard: bool) -> Any:
        return value.dump(standard)

    def java_hash(self, value: Any) -> int | None:
        return value.java_hash()


class MapKeyBody(Nested):
    """A body used as a map key (fastjson writes it as an object before the colon)."""

    def dump(self, value: Any, standard: bool) -> ObjectKey:
        return ObjectKey(value.dump(standard).items())


def jfield(name: str, kind: Kind, default: Any = None, factory: Callable[[], Any] | None = None) -> Any:
    """Declare a body field: its JSON property name and kind; ``None`` values are not written."""
    meta = {"json": name, "kind": kind}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class Body:
    """Base of typed bodies: ``from_json``/``to_json`` through the declared field table."""

    _table: ClassVar[tuple[tuple[str, str, Kind], ...]]
    _aliases: ClassVar[dict[str, str]] = {}

    @classmethod
    def json_fields(cls) -> tuple[tuple[str, str, Kind], ...]:
        """(json name, attribute, kind) in fastjson's writing order (alphabetical by JSON name)."""
        if "_table" not in cls.__dict__:
            rows = [(f.metadata["json"], f.name, f.metadata["kind"]) for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
            cls._table = tuple(sorted(rows))
        return cls._table

    @classmethod
    def load(cls: type[B], obj: Any, path: str | None = None) -> B:
        path = path or cls.__name__
        if not isinstance(obj, dict):
            raise BodyError(f"{path}: expected an object, got {type(obj).__name__}")
        values = {}
        for json_name, attr, kind in cls.json_fields():
            raw = obj.get(json_name)
            if raw is None:
                alias = cls._aliases.get(json_name)
                raw = obj.get(alias) if alias else None
            if raw is not None:
                values[attr] = kind.load(raw, f"{path}.{json_name}")
        return cls(**values)

    def dump(self, standard: bool = False) -> dict[str, Any]:
        out = {}
        for json_name, attr, kind in self.json_fields():
            value = getattr(self, attr)
            if value is not None:
                out[json_name] = kind.dump(value, standard)
        return out

    @classmethod
    def from_json(cls: type[B], data: bytes | str) -> B:
        """Parse a body as a Java peer writes it (standard JSON or fastjson's dialect)."""
        return cls.load(loads(data))

    def to_json(self, *, standard: bool = False) -> bytes:
        """Compact bytes as the Java class would be written (see the module doc)."""
        return dumps(self.dump(standard), quote_keys=standard, ascii_only=standard).encode("utf-8", "surrogatepass")

    def java_hash(self) -> int | None:
        return None


# --- shared pieces --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MessageQueue(Body):
    topic: str = jfield("topic", STR, "")
    broker_name: str = jfield("brokerName", STR, "")
    queue_id: int = jfield("queueId", INT, 0)

    def java_hash(self) -> int:
        h = 31 + string_hash(self.broker_name)
        h = (31 * h + self.queue_id) & 0xFFFFFFFF
        h = (31 * h + string_hash(self.topic)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h

    def __lt__(self, other: MessageQueue) -> bool:
        """Java ``MessageQueue.compareTo``: topic, then broker name, then queue id."""
        return (self.topic, self.broker_name, self.queue_id) < (other.topic, other.broker_name, other.queue_id)


MQ = Nested(MessageQueue)
MQ_KEY = MapKeyBody(MessageQueue)


@dataclasses.dataclass
class SubscriptionData(Body):
    topic: str | None = jfield("topic", STR)
    sub_string: str | None = jfield("subString", STR)
    tags_set: list[str] = jfield("tagsSet", SetOf(STR), factory=list)
    code_set: list[int] = jfield("codeSet", SetOf(INT), factory=list)
    sub_version: int | None = jfield("subVersion", LONG)
    expression_type: str | None = jfield("expressionType", STR)
    class_filter_mode: bool | None = jfield("classFilterMode", BOOL)


SUB_ALL = "*"


def build_subscription(topic: str, sub_string: str | None, sub_version: int = 0) -> SubscriptionData:
    """Java ``FilterAPI.buildSubscriptionData``: ``*``/empty matches all, else tags split on ``||``."""
    if not sub_string or not sub_string.strip() or sub_string == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, [], [], sub_version, "TAG", False)
    tags = [t.strip() for t in sub_string.split("||") if t.strip()]
    tags = list(dict.fromkeys(tags))
    codes = list(dict.fromkeys(string_hash(t) for t in tags))
    return SubscriptionData(topic, sub_string, tags, codes, sub_version, "TAG", False)


# --- heartbeat and client registry ----------------------------------------------------------


@dataclasses.dataclass
class ProducerData(Body):
    group_name: str | None = jfield("groupName", STR)


@dataclasses.dataclass
class ConsumerData(Body):
    group_name: str | None = jfield("groupName", STR)
    consume_type: str | None = jfield("consumeType", STR)
    message_model: str | None = jfield("messageModel", STR)
    consume_from_where: str | None = jfield("consumeFromWhere", STR)
    subscription_data_set: list[SubscriptionData] = jfield(
        "subscriptionDataSet", SetOf(Nested(SubscriptionData)), factory=list
    )
    unit_mode: bool | None = jfield("unitMode", BOOL)


@dataclasses.dataclass
class HeartbeatData(Body):
    client_id: str | None = jfield("clientID", STR)
    producer_data_set: list[ProducerData] = jfield("producerDataSet", SetOf(Nested(ProducerData)), factory=list)
    consumer_data_set: list[ConsumerData] = jfield("consumerDataSet", SetOf(Nested(ConsumerData)), factory=list)
    heartbeat_fingerprint: int | None = jfield("heartbeatFingerprint", INT)  # 5.x
    without_sub: bool | None = jfield("withoutSub", BOOL)  # 5.x


@dataclasses.dataclass
class CheckClientRequestBody(Body):
    """CHECK_CLIENT_CONFIG's body: a consumer asks whether the broker takes its subscription."""

    client_id: str | None = jfield("clientId", STR)
    group: str | None = jfield("group", STR)
    subscription_data: SubscriptionData | None = jfield("subscriptionData", Nested(SubscriptionData))


@dataclasses.dataclass
class GetConsumerListByGroupResponseBody(Body):
    consumer_id_list: list[str] = jfield("consumerIdList", ListOf(STR), factory=list)


# --- locks ----------------------------------------------------------------------------------


@dataclasses.dataclass
class LockBatchRequestBody(Body):
    consumer_group: str | None = jfield("consumerGroup", STR)
    client_id: str | None = jfield("clientId", STR)
    only_this_broker: bool | None = jfield("onlyThisBroker", BOOL)
    mq_set: list[MessageQueue] = jfield("mqSet", SetOf(MQ), factory=list)


@dataclasses.dataclass
class LockBatchResponseBody(Body):
    lock_ok_mq_set: list[MessageQueue] = jfield("lockOKMQSet", SetOf(MQ), factory=list)


@dataclasses.dataclass
class UnlockBatchRequestBody(LockBatchRequestBody):
    """Java declares the same fields again in its own class."""


# --- routes and cluster ---------------------------------------------------------------------


@dataclasses.dataclass
class BrokerData(Body):
    cluster: str | None = jfield("cluster", STR)
    broker_name: str | None = jfield("brokerName", STR)
    broker_addrs: dict[int, str] = jfield("brokerAddrs", MapOf(LongKey(), STR), factory=dict)
    enable_acting_master: bool | None = jfield("enableActingMaster", BOOL)  # 5.x
    zone_name: str | None = jfield("zoneName", STR)  # 5.x


@dataclasses.dataclass
class QueueData(Body):
    broker_name: str | None = jfield("brokerName", STR)
    read_queue_nums: int = jfield("readQueueNums", INT, 0)
    write_queue_nums: int = jfield("writeQueueNums", INT, 0)
    perm: int = jfield("perm", INT, 0)
    topic_sys_flag: int = jfield("topicSysFlag", INT, 0)

    _aliases: ClassVar[dict[str, str]] = {"topicSysFlag": "topicSynFlag"}  # old spelling (Go)


@dataclasses.dataclass
class TopicRouteData(Body):
    order_topic_conf: str | None = jfield("orderTopicConf", STR)
    queue_datas: list[QueueData] = jfield("queueDatas", ListOf(Nested(QueueData)), factory=list)
    broker_datas: list[BrokerData] = jfield("brokerDatas", ListOf(Nested(BrokerData)), factory=list)
    filter_server_table: dict[str, list[str]] = jfield("filterServerTable", MapOf(STR, ListOf(STR)), factory=dict)


@dataclasses.dataclass
class ClusterInfo(Body):
    broker_addr_table: dict[str, BrokerData] = jfield("brokerAddrTable", MapOf(STR, Nested(BrokerData)), factory=dict)
    cluster_addr_table: dict[str, list[str]] = jfield("clusterAddrTable", MapOf(STR, SetOf(STR)), factory=dict)


@dataclasses.dataclass
class TopicList(Body):
    topic_list: list[str] = jfield("topicList", SetOf(STR), factory=list)
    broker_addr: str | None = jfield("brokerAddr", STR)


@dataclasses.dataclass
class GroupList(Body):
    group_list: list[str] = jfield("groupList", SetOf(STR), factory=list)


@dataclasses.dataclass
class TopicConfig(Body):
    """One topic of GET_ALL_TOPIC_CONFIG (the broker's ``topics.json`` entry); 5.x adds ``attributes``."""

    topic_name: str | None = jfield("topicName", STR)
    read_queue_nums: int = jfield("readQueueNums", INT, 0)
    write_queue_nums: int = jfield("writeQueueNums", INT, 0)
    perm: int = jfield("perm", INT, 0)
    topic_filter_type: str = jfield("topicFilterType", STR, "SINGLE_TAG")
    topic_sys_flag: int = jfield("topicSysFlag", INT, 0)
    order: bool = jfield("order", BOOL, False)
    attributes: dict[str, str] | None = jfield("attributes", MapOf(STR, STR))


@dataclasses.dataclass
class TopicConfigAndQueueMapping(TopicConfig):
    """GET_TOPIC_CONFIG (351, 5.x) answer: a TopicConfig whose ``attributes`` are always written
    (``mappingDetail`` of static topics omitted)."""

    attributes: dict[str, str] = jfield("attributes", MapOf(STR, STR), factory=dict)


@dataclasses.dataclass
class KVTable(Body):
    table: dict[str, str] = jfield("table", MapOf(STR, STR), factory=dict)


# --- offsets and stats ----------------------------------------------------------------------


@dataclasses.dataclass
class TopicOffset(Body):
    min_offset: int = jfield("minOffset", LONG, 0)
    max_offset: int = jfield("maxOffset", LONG, 0)
    last_update_timestamp: int = jfield("lastUpdateTimestamp", LONG, 0)


@dataclasses.dataclass
class TopicStatsTable(Body):
    offset_table: dict[MessageQueue, TopicOffset] = jfield(
        "offsetTable", MapOf(MQ_KEY, Nested(TopicOffset)), factory=dict
    )


@dataclasses.dataclass
class OffsetWrapper(Body):
    broker_offset: int = jfield("brokerOffset", LONG, 0)
    consumer_offset: int = jfield("consumerOffset", LONG, 0)
    pull_offset: int | None = jfield("pullOffset", LONG)  # 5.x
    last_timestamp: int = jfield("lastTimestamp", LONG, 0)


@dataclasses.dataclass
class ConsumeStats(Body):
    offset_table: dict[MessageQueue, OffsetWrapper] = jfield(
        "offsetTable", MapOf(MQ_KEY, Nested(OffsetWrapper)), factory=dict
    )
    consume_tps: float = jfield("consumeTps", DOUBLE, 0.0)


@dataclasses.dataclass
class ConsumeStatsList(Body):
    """GET_BROKE_CONSUME_STATS (317): per subscription group, the consume stats of each of its topics."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = jfield(
        "consumeStatsList", ListOf(MapOf(STR, ListOf(Nested(ConsumeStats)))), factory=list
    )
    broker_addr: str | None = jfield("brokerAddr", STR)
    total_diff: int = jfield("totalDiff", LONG, 0)
    total_inflight_diff: int | None = jfield("totalInflightDiff", LONG)  # 5.x


@dataclasses.dataclass
class BrokerStatsItem(Body):
    sum: int = jfield("sum", LONG, 0)
    tps: float = jfield("tps", DOUBLE, 0.0)
    avgpt: float = jfield("avgpt", DOUBLE, 0.0)


@dataclasses.dataclass
class BrokerStatsData(Body):
    """VIEW_BROKER_STATS_DATA (315): one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem | None = jfield("statsMinute", Nested(BrokerStatsItem))
    stats_hour: BrokerStatsItem | None = jfield("statsHour", Nested(BrokerStatsItem))
    stats_day: BrokerStatsItem | None = jfield("statsDay", Nested(BrokerStatsItem))


@dataclasses.dataclass
class ClientConnection(Body):
    client_id: str | None = jfield("clientId", STR)
    client_addr: str | None = jfield("clientAddr", STR)
    language: str | None = jfield("language", STR)
    version: int = jfield("version", INT, 0)


@dataclasses.dataclass
class ConsumerConnection(Body):
    connection_set: list[ClientConnection] = jfield("connectionSet", SetOf(Nested(ClientConnection)), factory=list)
    subscription_table: dict[str, SubscriptionData] = jfield(
        "subscriptionTable", MapOf(STR, Nested(SubscriptionData)), factory=dict
    )
    consume_type: str | None = jfield("consumeType", STR)
    message_model: str | None = jfield("messageModel", STR)
    consume_from_where: str | None = jfield("consumeFromWhere", STR)


# --- consumer running info (GET_CONSUMER_RUNNING_INFO reply) ------------------------------


@dataclasses.dataclass
class ProcessQueueInfo(Body):
    commit_offset: int = jfield("commitOffset", LONG, 0)
    cached_msg_min_offset: int = jfield("cachedMsgMinOffset", LONG, 0)
    cached_msg_max_offset: int = jfield("cachedMsgMaxOffset", LONG, 0)
    cached_msg_count: int = jfield("cachedMsgCount", INT, 0)
    cached_msg_size_in_mib: int = jfield("cachedMsgSizeInMiB", INT, 0)
    transaction_msg_min_offset: int = jfield("transactionMsgMinOffset", LONG, 0)
    transaction_msg_max_offset: int = jfield("transactionMsgMaxOffset", LONG, 0)
    transaction_msg_count: int = jfield("transactionMsgCount", INT, 0)
    locked: bool = jfield("locked", BOOL, False)
    try_unlock_times: int = jfield("tryUnlockTimes", LONG, 0)
    last_lock_timestamp: int = jfield("lastLockTimestamp", LONG, 0)
    droped: bool = jfield("droped", BOOL, False)  # sic, Java spelling
    last_pull_timestamp: int = jfield("lastPullTimestamp", LONG, 0)
    last_consume_timestamp: int = jfield("lastConsumeTimestamp", LONG, 0)


@dataclasses.dataclass
class ConsumeStatus(Body):
    pull_rt: float = jfield("pullRT", DOUBLE, 0.0)
    pull_tps: float = jfield("pullTPS", DOUBLE, 0.0)
    consume_rt: float = jfield("consumeRT", DOUBLE, 0.0)
    consume_ok_tps: float = jfield("consumeOKTPS", DOUBLE, 0.0)
    consume_failed_tps: float = jfield("consumeFailedTPS", DOUBLE, 0.0)
    consume_failed_msgs: int = jfield("consumeFailedMsgs", LONG, 0)


@dataclasses.dataclass
class ConsumerRunningInfo(Body):
    properties: dict[str, str] = jfield("properties", MapOf(STR, STR), factory=dict)
    subscription_set: list[SubscriptionData] = jfield(
        "subscriptionSet", ListOf(Nested(SubscriptionData)), factory=list
    )
    mq_table: dict[MessageQueue, ProcessQueueInfo] = jfield(
        "mqTable", MapOf(MQ_KEY, Nested(ProcessQueueInfo), sorted_keys=True), factory=dict
    )
    status_table: dict[str, ConsumeStatus] = jfield(
        "statusTable", MapOf(STR, Nested(ConsumeStatus), sorted_keys=True), factory=dict
    )
    jstack: str | None = jfield("jstack", STR)


# --- offsets reset, consumer status, producers, consume queue (operations) -------------------


@dataclasses.dataclass
class ResetOffsetBody(Body):
    """INVOKE_BROKER_TO_RESET_OFFSET's answer and RESET_CONSUMER_CLIENT_OFFSET's body: queue → offset."""

    offset_table: dict[MessageQueue, int] = jfield("offsetTable", MapOf(MQ_KEY, LONG), factory=dict)


@dataclasses.dataclass
class MessageQueueForC(Body):
    topic: str | None = jfield("topic", STR)
    broker_name: str | None = jfield("brokerName", STR)
    queue_id: int = jfield("queueId", INT, 0)
    offset: int = jfield("offset", LONG, 0)


@dataclasses.dataclass
class ResetOffsetBodyForC(Body):
    """RESET_CONSUMER_CLIENT_OFFSET's body for a C++ client: a list in place of the map."""

    offset_table: list[MessageQueueForC] = jfield("offsetTable", ListOf(Nested(MessageQueueForC)), factory=list)


@dataclasses.dataclass
class GetConsumerStatusBody(Body):
    """A client's queue offsets (GET_CONSUMER_STATUS_FROM_CLIENT), or each client's, by client id
    (INVOKE_BROKER_TO_GET_CONSUMER_STATUS)."""

    message_queue_table: dict[MessageQueue, int] = jfield("messageQueueTable", MapOf(MQ_KEY, LONG), factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = jfield(
        "consumerTable", MapOf(STR, MapOf(MQ_KEY, LONG)), factory=dict
    )


@dataclasses.dataclass
class ProducerConnection(Body):
    connection_set: list[ClientConnection] = jfield("connectionSet", SetOf(Nested(ClientConnection)), factory=list)


@dataclasses.dataclass
class ConsumeMessageDirectlyResult(Body):
    """A client's answer to CONSUME_MESSAGE_DIRECTLY (relayed as it came; typed for tests and tools)."""

    order: bool = jfield("order", BOOL, False)
    auto_commit: bool = jfield("autoCommit", BOOL, True)
    consume_result: str | None = jfield("consumeResult", STR)
    remark: str | None = jfield("remark", STR)
    spent_time_mills: int = jfield("spentTimeMills", LONG, 0)


@dataclasses.dataclass
class ConsumeQueueData(Body):
    """One consume-queue entry as QUERY_CONSUME_QUEUE shows it."""

    physic_offset: int = jfield("physicOffset", LONG, 0)
    physic_size: int = jfield("physicSize", INT, 0)
    tags_code: int = jfield("tagsCode", LONG, 0)
    extend_data_json: str | None = jfield("extendDataJson", STR)
    bit_map: str | None = jfield("bitMap", STR)
    eval: bool = jfield("eval", BOOL, False)
    msg: str | None = jfield("msg", STR)


@dataclasses.dataclass
class QueryConsumeQueueResponseBody(Body):
    subscription_data: SubscriptionData | None = jfield("subscriptionData", Nested(SubscriptionData))
    filter_data: str | None = jfield("filterData", STR)
    queue_data: list[ConsumeQueueData] | None = jfield("queueData", ListOf(Nested(ConsumeQueueData)))
    max_queue_index: int = jfield("maxQueueIndex", LONG, 0)
    min_queue_index: int = jfield("minQueueIndex", LONG, 0)


# --- subscription groups (200, 201, 352) ----------------------------------------------------


@dataclasses.dataclass
class DataVersion(Body):
    """A table's version: bumped (counter + 1, timestamp now) on every change; 5.x adds ``stateVersion``."""

    counter: int = jfield("counter", LONG, 0)
    state_version: int | None = jfield("stateVersion", LONG)
    timestamp: int = jfield("timestamp", LONG, 0)


@dataclasses.dataclass
class TopicConfigSerializeWrapper(Body):
    """GET_ALL_TOPIC_CONFIG (21) answer: every topic by name, and the table's version."""

    topic_config_table: dict[str, TopicConfig] = jfield("topicConfigTable", MapOf(STR, Nested(TopicConfig)), factory=dict)
    data_version: DataVersion | None = jfield("dataVersion", Nested(DataVersion))


@dataclasses.dataclass(frozen=True)
class ExponentialRetryPolicy(Body):
    initial: int = jfield("initial", LONG, 0)
    max: int = jfield("max", LONG, 0)
    multiplier: int = jfield("multiplier", LONG, 0)


@dataclasses.dataclass(frozen=True)
class CustomizedRetryPolicy(Body):
    next: list[int] | None = jfield("next", ListOf(LONG))


@dataclasses.dataclass(frozen=True)
class GroupRetryPolicy(Body):
    """5.x ``GroupRetryPolicy``; the default is ``{"type":"CUSTOMIZED"}`` with neither policy set."""

    type: str | None = jfield("type", STR, "CUSTOMIZED")
    exponential_retry_policy: ExponentialRetryPolicy | None = jfield(
        "exponentialRetryPolicy", Nested(ExponentialRetryPolicy)
    )
    customized_retry_policy: CustomizedRetryPolicy | None = jfield(
        "customizedRetryPolicy", Nested(CustomizedRetryPolicy)
    )


@dataclasses.dataclass(frozen=True)
class SimpleSubscriptionData(Body):
    topic: str | None = jfield("topic", STR)
    expression_type: str | None = jfield("expressionType", STR)
    expression: str | None = jfield("expression", STR)
    version: int = jfield("version", LONG, 0)


@dataclasses.dataclass(frozen=True)
class SubscriptionGroupConfig(Body):
    """``SubscriptionGroupConfig`` with the reference's defaults (4.9 fields, then 5.x ones)."""

    group_name: str | None = jfield("groupName", STR)
    consume_enable: bool = jfield("consumeEnable", BOOL, True)
    consume_from_min_enable: bool = jfield("consumeFromMinEnable", BOOL, True)
    consume_broadcast_enable: bool = jfield("consumeBroadcastEnable", BOOL, True)
    retry_queue_nums: int = jfield("retryQueueNums", INT, 1)
    retry_max_times: int = jfield("retryMaxTimes", INT, 16)
    broker_id: int = jfield("brokerId", LONG, 0)
    which_broker_when_consume_slowly: int = jfield("whichBrokerWhenConsumeSlowly", LONG, 1)
    notify_consumer_ids_changed_enable: bool = jfield("notifyConsumerIdsChangedEnable", BOOL, True)
    consume_message_orderly: bool = jfield("consumeMessageOrderly", BOOL, False)  # 5.x
    group_retry_policy: GroupRetryPolicy = jfield("groupRetryPolicy", Nested(GroupRetryPolicy),
                                                  factory=GroupRetryPolicy)  # fmt: skip
    group_sys_flag: int = jfield("groupSysFlag", INT, 0)  # 5.x
    consume_timeout_minute: int = jfield("consumeTimeoutMinute", INT, 15)  # 5.x
    subscription_data_set: list[SimpleSubscriptionData] | None = jfield(
        "subscriptionDataSet", ListOf(Nested(SimpleSubscriptionData))
    )  # 5.x
    attributes: dict[str, str] = jfield("attributes", MapOf(STR, STR), factory=dict)  # 5.x


@dataclasses.dataclass
class SubscriptionGroupWrapper(Body):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) answer: every group's config, and the table's version."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = jfield(
        "subscriptionGroupTable", MapOf(STR, Nested(SubscriptionGroupConfig)), factory=dict
    )
    data_version: DataVersion = jfield("dataVersion", Nested(DataVersion), factory=DataVersion)
