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

from ..core.delay_levels import SCHEDULE_TOPIC
from ..core.files import JsonWriter, read_json
from ..core.names import AUTO_CREATE_TOPIC, OFFSET_MOVED_EVENT, SELF_TEST_TOPIC, check_name, reply_topic

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

@dataclasses.dataclass(frozen=True)
class TopicConfig:
    name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False

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
            self.topics[name] = TopicConfig(name, **data)
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
        return {
            c.name: {k: v for k, v in dataclasses.asdict(c).items() if k != "name"}
            for c in topics
            if c.name not in self.system_topics
        }

    def close(self) -> None:
        """Write what is pending and stop the writer (shutdown)."""
        self._writer.close()
