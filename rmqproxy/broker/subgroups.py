"""Subscription groups: each consumer group's config (may it consume, its retries, its retry
queues), what pulls, heartbeats and send-backs look up and mqadmin's updateSubGroup changes.

Persisted as the reference keeps it, ``<store>/config/subscriptionGroup.json``: a
``subscriptionGroupTable`` of ``SubscriptionGroupConfig`` JSON and a ``dataVersion``, replaced
atomically by a writer thread (as topics.json is), so a heartbeat that auto-creates thousands of
groups never writes on the reactor thread. Built in, as a 4.9 broker has them: ``TOOLS_CONSUMER``,
``FILTERSRV_CONSUMER``, ``SELF_TEST_C_GROUP`` and the ONS groups. An unknown group is created
with the defaults on first use while ``autoCreateSubscriptionGroup`` is on (and a ``CID_RMQ_SYS_``
group always), up to ``maxSubscriptionGroups`` groups.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codec.bodies import DataVersion, GroupRetryPolicy, SubscriptionGroupConfig, SubscriptionGroupWrapper
from codec.command import RemotingCommand
from codec.errors import BodyError

from ..core.files import JsonWriter, read_json
from ..core.names import check_group_name

SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
#: The groups every 4.9 broker has (``SubscriptionGroupManager.init``); the ONS ones may broadcast.
BUILTIN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                  "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")  # fmt: skip
#: The reference's remark tail for a missing group (``FAQUrl.suggestTodo``).
FAQ_TODO = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


class GroupRefused(ValueError):
    """A config rmqproxy will not store: a bad name or value, or a 5.x feature it does not keep."""


def unkept_feature(config: SubscriptionGroupConfig, max_retry_queues: int) -> str | None:
    """Why ``config`` cannot be stored as given, or None: its name, its numbers out of range, or a
    5.x setting rmqproxy would accept and then not honour (the reference's 5.x broker knows no
    group attributes either; ``consumeMessageOrderly`` makes a gRPC group FIFO, but gRPC retries
    follow the delay levels, not ``groupRetryPolicy``, and no ``groupSysFlag`` is kept)."""
    problem = check_group_name(config.group_name or "")
    if problem is not None:
        return problem
    if not 0 <= config.retry_queue_nums <= max_retry_queues:
        return f"retryQueueNums must be within [0, {max_retry_queues}] (maxTopicQueueNums), not {config.retry_queue_nums}"
    if config.retry_max_times < 0:
        return f"retryMaxTimes must be 0 or more, not {config.retry_max_times}"
    if config.broker_id < 0 or config.which_broker_when_consume_slowly < 0:
        return "brokerId and whichBrokerWhenConsumeSlowly must be 0 or more"
    if config.consume_timeout_minute <= 0:
        return f"consumeTimeoutMinute must be more than 0, not {config.consume_timeout_minute}"
    if config.attributes:
        return f"group attributes {sorted(config.attributes)} are not supported (rmqproxy keeps none)"
    if config.group_retry_policy != GroupRetryPolicy():
        return ("groupRetryPolicy is not supported by rmqproxy: retries follow the delay levels "
                '(messageDelayLevel); only the default {"type":"CUSTOMIZED"} is accepted')
    if config.group_sys_flag:
        return f"groupSysFlag {config.group_sys_flag} is not supported by rmqproxy (only 0)"
    return None


class SubscriptionGroupTable:
    """Every subscription group of this broker; each change bumps the data version and is persisted."""

    def __init__(self, path: Path, *, auto_create: bool, max_groups: int, max_retry_queues: int,
                 clock: Callable[[], float]) -> None:  # fmt: skip
        self.path = path
        self.auto_create = auto_create
        self.max_groups = max_groups
        self.max_retry_queues = max_retry_queues
        self.clock = clock
        self.groups: dict[str, SubscriptionGroupConfig] = {name: SubscriptionGroupConfig(name) for name in BUILTIN_GROUPS}
        self.version = DataVersion(0, None, self._now_ms())
        self._load(read_json(path, {}))
        # Each group as the file holds it, made when the group is stored: the writer thread then
        # only copies (a huge heartbeat creates thousands of groups, and rewrites come often).
        self._dumped = {name: config.dump() for name, config in self.groups.items()}
        self._lock = threading.Lock()  # the writer thread snapshots what the reactor thread changes
        self._writer = JsonWriter(path, self._snapshot, "rmqproxy-groups-writer")

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _load(self, data: object) -> None:
        """The groups of a persisted file. A file that cannot be read, or a group rmqproxy would
        refuse (a file carried over from a 5.x broker with attributes or a retry policy), stops
        the start naming it: starting without it, or with it unhonoured, would silently change
        how that group is served."""
        if not data:
            return
        try:
            wrapper = SubscriptionGroupWrapper.load(data)
        except (BodyError, TypeError) as exc:
            raise ValueError(f"{self.path} is not a subscription group table: {exc}") from None
        for name, config in wrapper.subscription_group_table.items():
            config = dataclasses.replace(config, group_name=name)
            problem = unkept_feature(config, self.max_retry_queues)
            if problem is not None:
                raise ValueError(f"{self.path}: group {name!r} cannot be served as configured: {problem}")
            self.groups[name] = config
        self.version = dataclasses.replace(wrapper.data_version)

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config as stored, never creating it (GET_SUBSCRIPTIONGROUP_CONFIG)."""
        return self.groups.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with the defaults when it is unknown and may be created
        (``findSubscriptionGroupConfig``); None for an unknown group that may not, or when the
        table is full."""
        config = self.groups.get(group)
        if config is not None:
            return config
        if not (self.auto_create or group.startswith(SYS_GROUP_PREFIX)) or check_group_name(group) is not None:
            return None
        if self.full:
            return None
        return self._store(SubscriptionGroupConfig(group))

    @property
    def full(self) -> bool:
        return len(self.groups) >= self.max_groups

    def bound_remark(self, group: str) -> str | None:
        """When ``find`` gave None for ``group`` only because the table is full: a remark saying so."""
        if self.full and group not in self.groups and check_group_name(group) is None and (
                self.auto_create or group.startswith(SYS_GROUP_PREFIX)):
            return (f"subscription group [{group}] does not exist and cannot be created: the broker holds "
                    f"{len(self.groups)} groups (maxSubscriptionGroups)")
        return None

    def put(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        """Create or replace a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP); GroupRefused says why not."""
        problem = unkept_feature(config, self.max_retry_queues)
        if problem is None and config.group_name not in self.groups and self.full:
            problem = f"the broker already holds {len(self.groups)} subscription groups (maxSubscriptionGroups)"
        if problem is not None:
            raise GroupRefused(problem)
        return self._store(config)

    def _store(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        dumped = config.dump()
        with self._lock:
            self.groups[config.group_name] = config
            self._dumped[config.group_name] = dumped
            self._next_version()
        self._writer.changed()
        return config

    def delete(self, group: str) -> bool:
        """Remove a group; False when there was none."""
        with self._lock:
            if self.groups.pop(group, None) is None:
                return False
            del self._dumped[group]
            self._next_version()
        self._writer.changed()
        return True

    def _next_version(self) -> None:
        self.version = DataVersion(self.version.counter + 1, self.version.state_version, self._now_ms())

    def wrapper(self) -> SubscriptionGroupWrapper:
        """The whole table as GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers it (and the file holds it)."""
        with self._lock:
            return SubscriptionGroupWrapper(dict(self.groups), self.version)

    def _snapshot(self) -> dict:
        with self._lock:
            return {"subscriptionGroupTable": dict(self._dumped), "dataVersion": self.version.dump()}

    def close(self) -> None:
        """Write what is pending and stop the writer (shutdown)."""
        self._writer.close()


#: ``MQVersion.Version.V3_4_9.ordinal()``: clients from it on send their own ``maxReconsumeTimes``.
VERSION_3_4_9 = 121


def max_reconsume_times(request: RemotingCommand, header: Any, config: SubscriptionGroupConfig) -> int:
    """Reconsume times after which a message goes to the group's DLQ: the request header's
    ``maxReconsumeTimes`` when a client from 3.4.9 on sent one, else the group's ``retryMaxTimes``."""
    requested = header.max_reconsume_times
    if requested is not None and request.version >= VERSION_3_4_9:
        return requested
    return config.retry_max_times
