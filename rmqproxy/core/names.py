"""RocketMQ's names: the broker's own topics, retry/DLQ/reply topic names, and the rules a topic
or group name must follow (``TopicValidator``, ``MixAll``, ``Validators``). Facts both modes and
the metrics read; the broker's topic table is ``broker/topics.py``."""

from __future__ import annotations

import re

from .delay_levels import SCHEDULE_TOPIC, TIMER_TOPIC

AUTO_CREATE_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
#: Topics every broker has, as RocketMQ's ``TopicValidator`` lists them (with ``rmq_sys_*``).
SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC, SCHEDULE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, HALF_TOPIC, OP_TOPIC,
                           CHECK_MAX_TOPIC})  # fmt: skip
#: Topics only the broker writes (``TopicValidator``'s not-allowed-send set): a send is NO_PERMISSION.
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, HALF_TOPIC, OP_TOPIC,
                                     CHECK_MAX_TOPIC, TIMER_TOPIC})  # fmt: skip


def is_system_topic(topic: str) -> bool:
    """Whether ``topic`` is one of the broker's own (RocketMQ's ``TopicValidator.isSystemTopic``)."""
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 127
MAX_GROUP_LENGTH = 255


def _check(kind: str, name: str, max_length: int) -> str | None:
    if not name:
        return f"the specified {kind} is blank"
    if len(name) > max_length:
        return f"the specified {kind} is longer than {kind} max length {max_length}"
    if not TOPIC_PATTERN.match(name):
        return f"the specified {kind}[{name}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


def check_topic_name(topic: str) -> str | None:
    """Why ``topic`` is not a valid name, or None (``TopicValidator`` of 4.9.8)."""
    return _check("topic", topic, MAX_TOPIC_LENGTH)


def check_group_name(group: str) -> str | None:
    """Why ``group`` is not a valid group name, or None: the topic character set and at most 255
    characters (the client's ``Validators.checkGroup``, which 5.x brokers apply before they create
    a group)."""
    return _check("group", group, MAX_GROUP_LENGTH)


def check_name(topic: str) -> str | None:
    """Why the broker must not create ``topic``, or None. A retry or DLQ topic is checked by its
    group, since its prefix is added to a valid group name; every other topic as a topic."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return check_group_name(topic[len(prefix):])
    return check_topic_name(topic)


def check_new_topic(topic: str) -> str | None:
    """Why a client may not create ``topic`` (a send's auto-create, updateTopic), or None: the
    topic rule, and for a retry or DLQ name its group's as well (``TopicTable.put`` checks that)."""
    return check_topic_name(topic) or check_name(topic)


def reply_topic(cluster: str) -> str:
    """Where replies to requests are stored (Java ``MixAll.getReplyTopic``)."""
    return f"{cluster}_REPLY_TOPIC"


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group
