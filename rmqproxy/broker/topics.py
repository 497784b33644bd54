"""Topic configurations: queue counts and permissions, what routes advertise and sends obey.

Persisted as ``<store>/config/topics.json`` (atomic replace) by a writer thread, so creating
topics (a heartbeat may name thousands of groups, each with a retry topic) never writes a file on
the reactor thread. Built in, as a RocketMQ broker
has them: ``TBW102`` (the auto-create template, perm 7 = readable, writable, inheritable while
auto-create is on), ``SCHEDULE_TOPIC_XXXX``, ``SELF_TEST_TOPIC``, ``OFFSET_MOVED_EVENT`` and
topics named after the cluster and the broker. Retry and DLQ topics get 1 queue, perm 6.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

from codec.codes import ResponseCode

from ..core.delay_levels import SCHEDULE_TOPIC
from ..core.files import JsonWriter, read_json
from ..core.names import AUTO_CREATE_TOPIC, OFFSET_MOVED_EVENT, SELF_TEST_TOPIC, check_name, reply_topic

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

#: The 5.x topic attribute naming the type of message a topic takes (``mqadmin updateTopic -a
#: +message.type=FIFO``); gRPC sends must match it, remoting sends are not checked (as on a 5.x broker).
MESSAGE_TYPE = "message.type"
MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION")
#: 5.x topic attributes rmqproxy takes, with the values it keeps: any message type, and every other
#: key only at the value rmqproxy always has (a plain queue topic, deleted by age). Anything else
#: (compaction, batch consume queues, per-topic retention, MIXED types) would be a promise accepted
#: and not kept.
KEPT_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    MESSAGE_TYPE: MESSAGE_TYPES,
    "queue.type": ("SimpleCQ",),
    "cleanup.policy": ("DELETE",),
    "reserve.time": ("-1",),
}


class AttributeRefused(ValueError):
    """A topic attribute change refused: the remoting ``code`` and the ``remark`` to answer with."""

    def __init__(self, remark: str, code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(remark)
        self.code, self.remark = code, remark


def alter_attributes(current: tuple[tuple[str, str], ...], change: str | None, *,
                     creating: bool) -> tuple[tuple[str, str], ...]:  # fmt: skip
    """``current`` attributes after ``change`` (``+key=value`` sets, ``-key`` removes, comma
    separated, as ``mqadmin updateTopic -a`` sends them), by a 5.x broker's rules: a new topic
    takes only ``+`` items, a removed key must be there, a key appears once, and MIXED is refused
    with INVALID_PARAMETER (``enableMixedMessageType`` being off); other refusals are
    SYSTEM_ERROR, among them values rmqproxy does not keep (``KEPT_ATTRIBUTES``)."""
    result = dict(current)
    seen = set()
    for item in (change or "").split(","):
        item = item.strip()
        if not item:
            continue
        sign, (key, has_value, value) = item[:1], item[1:].partition("=")
        if sign not in "+-" or not key or bool(has_value) != (sign == "+"):
            raise AttributeRefused(f"topic attribute {item!r} is not +key=value or -key")
        if key in seen:
            raise AttributeRefused(f"alter duplication key. key: {key}")
        seen.add(key)
        if key == MESSAGE_TYPE and value == "MIXED":
            raise AttributeRefused("MIXED message type is not supported.", ResponseCode.INVALID_PARAMETER)
        if key not in KEPT_ATTRIBUTES:
            raise AttributeRefused(f"unsupported key: {key}")
        if sign == "-" and creating:
            raise AttributeRefused(f"only add attribute is supported while creating topic. key: {key}")
        if sign == "-" and result.pop(key, None) is None:
            raise AttributeRefused(f"attempt to delete a nonexistent key: {key}")
        if sign == "+" and value not in KEPT_ATTRIBUTES[key]:
            kept = ", ".join(f"{k}={'|'.join(v)}" for k, v in KEPT_ATTRIBUTES.items())
            raise AttributeRefused(f"topic attribute {item} is not supported by rmqproxy: it keeps {kept}")
        if sign == "+":
            result[key] = value
    return tuple(sorted(result.items()))


@dataclasses.dataclass(frozen=True)
class TopicConfig:
    name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False
    #: 5.x attributes (``message.type`` and the kept defaults of ``KEPT_ATTRIBUTES``), sorted (key, value)
    attributes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, name: str, data: dict) -> TopicConfig:
        """A topic as ``TopicTable`` persists it (attributes as an object, as topics.json holds
        them); attributes rmqproxy does not keep (a file written by hand) raise ``AttributeRefused``."""
        data = dict(data)
        given = data.pop("attributes", None) or {}
        attributes = alter_attributes((), ",".join(f"+{k}={v}" for k, v in given.items()), creating=True)
        return cls(name, **data, attributes=attributes)

    def to_json(self) -> dict:
        """What ``TopicTable`` persists of the topic (``from_json`` reads it back)."""
        data = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("name", "attributes")}
        return {**data, "attributes": dict(self.attributes)} if self.attributes else data

    @property
    def message_type(self) -> str:
        """The 5.x message type a gRPC send must match (NORMAL unless set, as on a 5.x broker)."""
        return dict(self.attributes).get(MESSAGE_TYPE, "NORMAL")

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def queue_count(self) -> int:
        return max(self.read_queue_nums, self.write_queue_nums)


class TopicTable:
    """All topics of this broker; every change is persisted at once."""

    def __init__(self, path: Path, *, cluster: str, broker: str, auto_create: bool, default_queues: int) -> None:
        self.path = path
        self.auto_create = auto_create
        self.topics: dict[str, TopicConfig] = {}
        for name, data in read_json(path, {}).items():
            try:
                self.topics[name] = TopicConfig.from_json(name, data)
            except AttributeRefused as refused:  # served as it asks, or not at all: stop the start
                raise ValueError(f"{path}: topic {name!r} cannot be served as configured: {refused.remark}") from None
        template_perm = PERM_READ | PERM_WRITE | (PERM_INHERIT if auto_create else 0)
        builtin = [
            TopicConfig(AUTO_CREATE_TOPIC, default_queues, default_queues, template_perm),
            TopicConfig(SCHEDULE_TOPIC, 18, 18),
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(cluster, 16, 16, PERM_READ | PERM_WRITE | PERM_INHERIT),
            TopicConfig(broker, 1, 1, PERM_READ | PERM_WRITE | PERM_INHERIT),
            TopicConfig(reply_topic(cluster), 1, 1, PERM_READ | PERM_WRITE),
        ]
        for config in builtin:
            self.topics[config.name] = config
        self.system_topics = {c.name for c in builtin}
        self.version = 0  # goes up at each change (GET_ALL_TOPIC_CONFIG's dataVersion counter)
        self.version_ms = int(time.time() * 1000)  # when it last went up
        self._lock = threading.Lock()  # the writer thread snapshots what the reactor thread changes
        self._writer = JsonWriter(path, self._snapshot, "rmqproxy-topics-writer")

    def get(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def put(self, config: TopicConfig) -> TopicConfig:
        """Add or replace a topic; a name ``check_name`` refuses raises ValueError (every caller
        validates first: this is the last line before a name reaches the store's paths)."""
        problem = check_name(config.name)
        if problem is not None:
            raise ValueError(problem)
        with self._lock:
            self.topics[config.name] = config
        self._changed()
        return config

    def delete(self, topic: str) -> bool:
        if topic in self.system_topics:
            return False
        with self._lock:
            if self.topics.pop(topic, None) is None:
                return False
        self._changed()
        return True

    def set_template(self, auto_create: bool, default_queues: int) -> None:
        """Give TBW102 the perm and queues of ``autoCreateTopicEnable`` and ``defaultTopicQueueNums``
        (changed at runtime): sends and routes read it at each use."""
        self.auto_create = auto_create
        perm = PERM_READ | PERM_WRITE | (PERM_INHERIT if auto_create else 0)
        template = TopicConfig(AUTO_CREATE_TOPIC, default_queues, default_queues, perm)
        if self.topics.get(AUTO_CREATE_TOPIC) != template:
            with self._lock:
                self.topics[AUTO_CREATE_TOPIC] = template
            self.version += 1
            self.version_ms = int(time.time() * 1000)

    def _changed(self) -> None:
        self.version += 1
        self.version_ms = int(time.time() * 1000)
        self._writer.changed()

    def create_on_send(self, topic: str, default_topic: str, requested_queues: int) -> TopicConfig | None:
        """Auto-create ``topic`` from its default topic, as the first send of a Java producer
        expects: queues = min(requested, template write queues), perm = template perm minus
        INHERIT. None when the template does not allow it (auto-create off)."""
        template = self.topics.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT or default_topic in (topic,):
            return None
        queues = max(1, min(requested_queues, template.write_queue_nums))
        return self.put(TopicConfig(topic, queues, queues, template.perm & ~PERM_INHERIT))

    def ensure(self, topic: str, queues: int = 1, perm: int = PERM_READ | PERM_WRITE) -> TopicConfig:
        """The topic, created with ``queues`` queues if missing (retry and DLQ topics)."""
        config = self.topics.get(topic)
        return config if config is not None else self.put(TopicConfig(topic, queues, queues, perm))

    def _snapshot(self) -> dict:
        with self._lock:
            topics = list(self.topics.values())
        return {c.name: c.to_json() for c in topics if c.name not in self.system_topics}

    def close(self) -> None:
        """Write what is pending and stop the writer (shutdown)."""
        self._writer.close()
