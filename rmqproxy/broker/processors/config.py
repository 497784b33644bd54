"""Configuration over the wire (docs/operations.md, "Changing configuration at runtime"):
UPDATE_BROKER_CONFIG (25), GET_NAMESRV_CONFIG (319), UPDATE_NAMESRV_CONFIG (318), and
GET_ALL_TOPIC_CONFIG (21, mqadmin ``exportMetadata`` and the console) with
GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305, which ``exportMetadata`` leaves out). GET_BROKER_CONFIG (26)
stays with the admin processor; it reads the same ``Config``, so it shows every change.
"""

from __future__ import annotations

from twisted.logger import Logger

from codec.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicList
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand

from ...core.config import SETTINGS, Config
from ...net.dispatch import Route
from ..config_updates import ConfigUpdateError, RuntimeConfig, properties_text
from ..topics import TopicTable
from ...core.names import SYSTEM_TOPICS, is_system_topic

log = Logger()


class ConfigProcessor:
    def __init__(self, config: Config, runtime: RuntimeConfig, topics: TopicTable, kv_path: str) -> None:
        self.config = config
        self.runtime = runtime
        self.topics = topics
        self.kv_path = kv_path

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [
            Route(RequestCode.UPDATE_BROKER_CONFIG, self.update_broker_config),
            Route(RequestCode.GET_NAMESRV_CONFIG, self.namesrv_config),
            Route(RequestCode.UPDATE_NAMESRV_CONFIG, self.update_namesrv_config),
            Route(RequestCode.GET_ALL_TOPIC_CONFIG, self.all_topic_config),
            Route(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, self.system_topics),
        ]

    def update_broker_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        return self._update(request, conn, namesrv=False)

    def update_namesrv_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        return self._update(request, conn, namesrv=True)

    def _update(self, request: RemotingCommand, conn, *, namesrv: bool) -> RemotingCommand:
        try:
            keys = self.runtime.update(request.body, namesrv=namesrv)
        except ConfigUpdateError as exc:
            log.warn("config update refused: {remark}", remark=exc.remark)
            return request.response(exc.code, exc.remark)
        if keys:
            log.info("config updated at runtime: {changes}; written to {path}",
                     changes=", ".join(sorted(keys)), path=self.config.config_file)  # fmt: skip
        return request.response(ResponseCode.SUCCESS)

    def namesrv_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """The name server's keys as properties text, with the reference's read-only paths."""
        text = properties_text(
            self.config, [s for s in SETTINGS if s.namesrv],
            {"kvConfigPath": self.kv_path, "configStorePath": str(self.config.config_file)},
        )  # fmt: skip
        return request.response(ResponseCode.SUCCESS, body=text.encode("utf-8"))

    def all_topic_config(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        table = {
            t.name: TopicConfig(t.name, t.read_queue_nums, t.write_queue_nums, t.perm, "SINGLE_TAG", t.topic_sys_flag,
                                t.order, dict(t.attributes) or None)
            for t in list(self.topics.topics.values())
        }  # fmt: skip
        body = TopicConfigSerializeWrapper(table, DataVersion(counter=self.topics.version, timestamp=self.topics.version_ms))
        return request.response(ResponseCode.SUCCESS, body=body.to_json())

    def system_topics(self, request: RemotingCommand, header, conn) -> RemotingCommand:
        """The broker's system topics (the reference's ``TopicValidator`` set, and any ``rmq_sys_*``)."""
        names = SYSTEM_TOPICS | {name for name in list(self.topics.topics) if is_system_topic(name)}
        return request.response(ResponseCode.SUCCESS, body=TopicList(sorted(names)).to_json())
