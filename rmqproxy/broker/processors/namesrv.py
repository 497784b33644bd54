"""Name-server role: routes (with ``orderTopicConf`` when ``orderMessageEnable``), cluster info,
topic lists, KV config (rmqproxy/broker/kv.py) (docs/protocol.md, Routes).

One process plays both roles, so every route names this broker, at the advertised address.
"""

from __future__ import annotations

from codec.bodies import BrokerData, ClusterInfo, KVTable, QueueData, TopicList, TopicRouteData
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.headers import AddWritePermOfBrokerResponseHeader, GetKVConfigResponseHeader, WipeWritePermOfBrokerResponseHeader

from ...core.config import Config
from ...net.dispatch import Route
from ..kv import ORDER_TOPIC_CONFIG, KVConfig, KVError
from ..permission import BrokerPermission
from ..subgroups import SubscriptionGroupTable
from ..topics import TopicTable
from ...core.names import RETRY_PREFIX, check_name

# MQVersion ordinal of 4.9.4: clients from here on (and any asking acceptStandardJsonOnly) get
# standard JSON routes; older ones, and Go (version 317), get fastjson's unquoted broker ids.
STANDARD_JSON_ROUTES_SINCE = 401


class NameServer:
    def __init__(self, config: Config, topics: TopicTable, permission: BrokerPermission, kv: KVConfig, *,
                 groups: SubscriptionGroupTable) -> None:  # fmt: skip
        self.config = config
        self.topics = topics
        self.permission = permission
        self.groups = groups
        self.kv = kv

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.route),
            Route(RequestCode.GET_BROKER_CLUSTER_INFO, self.cluster_info),
            Route(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.all_topics),
            Route(RequestCode.GET_TOPICS_BY_CLUSTER, self.topics_by_cluster),
            Route(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, self.system_topics),
            Route(RequestCode.GET_KV_CONFIG, self.kv_config),
            Route(RequestCode.PUT_KV_CONFIG, self.put_kv_config),
            Route(RequestCode.DELETE_KV_CONFIG, self.delete_kv_config),
            Route(RequestCode.GET_KVLIST_BY_NAMESPACE, self.kv_list),
            Route(RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic),
            Route(RequestCode.WIPE_WRITE_PERM_OF_BROKER, self.wipe_write_perm),
            Route(RequestCode.ADD_WRITE_PERM_OF_BROKER, self.add_write_perm),
        ]

    def _broker_data(self) -> BrokerData:
        return BrokerData(self.config.cluster_name, self.config.broker_name, {0: self.config.advertised_address})

    def route(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        topic = self.topics.get(header.topic)
        if topic is None and header.topic.startswith(RETRY_PREFIX) and check_name(header.topic) is None:
            # A consumer asks for its retry topic's route before its first heartbeat creates it;
            # answering 17 leaves its retry queue unassigned for a 30 s route poll.
            group = self.groups.find(header.topic[len(RETRY_PREFIX):])
            if group is not None and group.retry_queue_nums > 0:
                topic = self.topics.ensure(header.topic, group.retry_queue_nums)
        if topic is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}\n"
                "See http://rocketmq.apache.org/docs/faq/ for further details.",
            )
        route = TopicRouteData(
            queue_datas=[
                QueueData(self.config.broker_name, topic.read_queue_nums, topic.write_queue_nums,
                          self.permission.route_perm(topic.perm), topic.topic_sys_flag)
            ],
            broker_datas=[self._broker_data()],
            filter_server_table={},
        )  # fmt: skip
        if self.config.order_message_enable:  # as the reference's name server: only then
            route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, header.topic)
        standard = request.version >= STANDARD_JSON_ROUTES_SINCE or bool(header.accept_standard_json_only)
        return request.response(ResponseCode.SUCCESS, body=route.to_json(standard=standard))

    def cluster_info(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        info = ClusterInfo(
            {self.config.broker_name: self._broker_data()}, {self.config.cluster_name: [self.config.broker_name]}
        )
        return request.response(ResponseCode.SUCCESS, body=info.to_json())

    def all_topics(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=TopicList(sorted(self.topics.topics)).to_json())

    def topics_by_cluster(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        names = sorted(self.topics.topics) if header.cluster == self.config.cluster_name else []
        return request.response(ResponseCode.SUCCESS, body=TopicList(names).to_json())

    def system_topics(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        body = TopicList(sorted(self.topics.system_topics), self.config.advertised_address)
        return request.response(ResponseCode.SUCCESS, body=body.to_json())

    def kv_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        value = self.kv.get(header.namespace, header.key)
        if value is None:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace} Key: {header.key}"
            )
        return request.response(ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value=value).to_ext())

    def put_kv_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        try:
            self.kv.put(header.namespace, header.key, header.value)
        except (KVError, OSError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"KV config not changed: {exc}")
        return request.response(ResponseCode.SUCCESS)

    def delete_kv_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        try:
            self.kv.delete(header.namespace, header.key)
        except OSError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"KV config not changed: {exc}")
        return request.response(ResponseCode.SUCCESS)

    def kv_list(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        entries = self.kv.namespace(header.namespace)
        if entries is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
        return request.response(ResponseCode.SUCCESS, body=KVTable(entries).to_json())

    def delete_topic(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        self.topics.delete(header.topic)
        return request.response(ResponseCode.SUCCESS)

    def wipe_write_perm(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """mqadmin ``wipeWritePerm``: this broker stops taking writes; answers how many topics'
        routes lost WRITE (all of them; 0 for another broker name, as the reference counts)."""
        return self._switch_write(request, header.broker_name, self.permission.wipe_write,
                                  lambda n: WipeWritePermOfBrokerResponseHeader(wipe_topic_count=n))  # fmt: skip

    def add_write_perm(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """mqadmin ``addWritePerm``: this broker takes writes again (``addTopicCount`` as above)."""
        return self._switch_write(request, header.broker_name, self.permission.add_write,
                                  lambda n: AddWritePermOfBrokerResponseHeader(add_topic_count=n))  # fmt: skip

    def _switch_write(self, request: RemotingCommand, broker_name: str, change, answer) -> RemotingCommand:
        if broker_name != self.config.broker_name:
            return request.response(ResponseCode.SUCCESS, ext_fields=answer(0).to_ext())
        try:
            change()
        except OSError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"cannot save brokerPermission: {exc}")
        return request.response(ResponseCode.SUCCESS, ext_fields=answer(len(self.topics.topics)).to_ext())
