"""Who is connected: producer and consumer groups, their clients, connections and subscriptions.

Keyed per (group, connection): a Java client opens one connection per server address and a
client id can appear on a reconnect, so the connection is the identity and the client id its
label. Membership changes (a new client, an unregister, a closed connection) are returned to the
caller, which notifies the remaining consumers (NOTIFY_CONSUMER_IDS_CHANGED) — this module does
no I/O. Subscriptions are per group and topic; a higher ``subVersion`` replaces a lower one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable

from codec.bodies import ConsumerData, HeartbeatData, SubscriptionData

from ..core.names import check_group_name, check_name


@dataclasses.dataclass
class ClientInfo:
    """One client connection as its heartbeat described it."""

    client_id: str
    language: str
    version: int
    remote: str
    last_heartbeat_ms: int


@dataclasses.dataclass
class ConsumerGroup:
    name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, SubscriptionData] = dataclasses.field(default_factory=dict)
    members: dict[Hashable, ClientInfo] = dataclasses.field(default_factory=dict)

    def client_ids(self) -> list[str]:
        """Member client ids, sorted and unique: every member must see the same list."""
        return sorted({info.client_id for info in self.members.values()})


def valid_heartbeat(data: HeartbeatData) -> HeartbeatData:
    """``data`` less what must not be registered: producers and consumers whose group name
    ``check_group_name`` refuses (a 5.x broker skips such a group: no retry topic, no member) and
    subscriptions to topics ``check_name`` refuses."""
    consumers = [
        dataclasses.replace(c, subscription_data_set=[
            s for s in c.subscription_data_set if s.topic and check_name(s.topic) is None
        ])
        for c in data.consumer_data_set
        if c.group_name and check_group_name(c.group_name) is None
    ]  # fmt: skip
    producers = [p for p in data.producer_data_set if p.group_name and check_group_name(p.group_name) is None]
    return dataclasses.replace(data, consumer_data_set=consumers, producer_data_set=producers)


class ClientRegistry:
    def __init__(self) -> None:
        self.consumers: dict[str, ConsumerGroup] = {}
        self.producers: dict[str, dict[Hashable, ClientInfo]] = {}
        self._clients: dict[Hashable, ClientInfo] = {}  # connection → what its last heartbeat said, and when
        self._producer_by_id: dict[str, Hashable] = {}  # client id → its connection, for replies to requests

    def client_of(self, conn: Hashable) -> ClientInfo | None:
        """What ``conn``'s last heartbeat said of its client, if it sent one."""
        return self._clients.get(conn)

    def silent_since(self, before_ms: int) -> list[Hashable]:
        """Connections whose last heartbeat came before ``before_ms`` (reactor ms: monotonic, since
        channel expiry is a relative wait)."""
        return [conn for conn, info in self._clients.items() if info.last_heartbeat_ms < before_ms]

    def heartbeat(self, conn: Hashable, info: ClientInfo, data: HeartbeatData) -> list[str]:
        """Register what a heartbeat says; return consumer groups whose membership changed."""
        self._clients[conn] = info
        changed = []
        for consumer in data.consumer_data_set:
            if consumer.group_name and self._register_consumer(conn, info, consumer):
                changed.append(consumer.group_name)
        for producer in data.producer_data_set:
            if producer.group_name:
                self.producers.setdefault(producer.group_name, {})[conn] = info
                if info.client_id:
                    self._producer_by_id[info.client_id] = conn
        return changed

    def producer_connection(self, client_id: str) -> Hashable | None:
        """The connection of the producer client ``client_id`` (where a reply to its request goes)."""
        conn = self._producer_by_id.get(client_id)
        return conn if conn in self._clients else None

    def _register_consumer(self, conn: Hashable, info: ClientInfo, data: ConsumerData) -> bool:
        group = self.consumers.get(data.group_name)
        if group is None:
            group = self.consumers[data.group_name] = ConsumerGroup(data.group_name)
        group.consume_type = data.consume_type or group.consume_type
        group.message_model = data.message_model or group.message_model
        group.consume_from_where = data.consume_from_where or group.consume_from_where
        for sub in data.subscription_data_set:
            if not sub.topic:
                continue
            current = group.subscriptions.get(sub.topic)
            if current is None or (sub.sub_version or 0) >= (current.sub_version or 0):
                group.subscriptions[sub.topic] = sub
        new_member = conn not in group.members or group.members[conn].client_id != info.client_id
        group.members[conn] = info
        return new_member

    def unregister(self, conn: Hashable, producer_group: str | None, consumer_group: str | None) -> list[str]:
        """UNREGISTER_CLIENT: drop this connection from the named groups."""
        if producer_group:
            self.producers.get(producer_group, {}).pop(conn, None)
            self._drop_empty_producer_groups()
        if consumer_group:
            group = self.consumers.get(consumer_group)
            if group is not None and group.members.pop(conn, None) is not None:
                return [consumer_group]
        return []

    def connection_closed(self, conn: Hashable) -> list[str]:
        """A connection is gone: it leaves every group; return consumer groups that changed."""
        info = self._clients.pop(conn, None)
        if info is not None and self._producer_by_id.get(info.client_id) is conn:
            del self._producer_by_id[info.client_id]
        for members in self.producers.values():
            members.pop(conn, None)
        self._drop_empty_producer_groups()
        return [name for name, group in self.consumers.items() if group.members.pop(conn, None) is not None]

    def _drop_empty_producer_groups(self) -> None:
        """Forget producer groups no connection is in: the table is bounded by live connections."""
        for name in [name for name, members in self.producers.items() if not members]:
            del self.producers[name]

    def producer_group(self, name: str) -> list[ClientInfo]:
        """The clients of producer group ``name`` (GET_PRODUCER_CONNECTION_LIST)."""
        return list(self.producers.get(name, {}).values())

    def consumer_group(self, name: str) -> ConsumerGroup | None:
        return self.consumers.get(name)

    def members(self, group: str) -> list[tuple[Hashable, ClientInfo]]:
        """(connection, client) of each member of consumer ``group``."""
        found = self.consumers.get(group)
        return list(found.members.items()) if found is not None else []

    def find(self, group: str, client_id: str) -> Hashable | None:
        """The connection of ``client_id`` in consumer ``group`` (for GET_CONSUMER_RUNNING_INFO)."""
        found = self.consumers.get(group)
        if found is not None:
            for conn, info in found.members.items():
                if info.client_id == client_id:
                    return conn
        return None

    def groups_subscribed_to(self, topic: str) -> list[str]:
        return sorted(name for name, g in self.consumers.items() if topic in g.subscriptions and g.members)

    def all_connections(self) -> Iterable[tuple[Hashable, ClientInfo]]:
        seen = {}
        for group in self.consumers.values():
            seen.update(group.members)
        for members in self.producers.values():
            seen.update(members)
        return seen.items()
