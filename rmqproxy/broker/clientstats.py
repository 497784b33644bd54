"""What consumers measure of themselves: each is asked for its running info
(GET_CONSUMER_RUNNING_INFO, 307) every ``clientStatsIntervalSeconds``, and its pull RT, TPS and
consume figures are exported beside the server's own (``Metrics.on_running_info``). A client's
pull RT includes the whole hold, which is exactly what the server's split explains.
"""

from __future__ import annotations

from codec.bodies import ConsumerRunningInfo
from codec.codes import RequestCode
from codec.command import RemotingCommand
from codec.errors import CodecError
from codec.headers import GetConsumerRunningInfoRequestHeader

from .clients import ClientRegistry
from ..observe.metrics import Metrics

TIMEOUT_S = 5.0  # a consumer that has not answered by then counts as failed this round


class ClientStats:
    def __init__(self, clients: ClientRegistry, metrics: Metrics, timeout_s: float = TIMEOUT_S) -> None:
        self.clients = clients
        self.metrics = metrics
        self.timeout_s = timeout_s

    def poll(self) -> None:
        """Ask every connected consumer for its running info."""
        for name, group in list(self.clients.consumers.items()):
            self.metrics.client_stats_failures.labels(self.metrics.group_label(name))  # at 0 from the start
            for conn, info in list(group.members.items()):
                if not conn.connected or not info.client_id:
                    continue
                request = RemotingCommand(
                    code=RequestCode.GET_CONSUMER_RUNNING_INFO,
                    ext_fields=GetConsumerRunningInfoRequestHeader(
                        consumer_group=name, client_id=info.client_id, jstack_enable=False
                    ).to_ext(),
                )
                d = conn.request(request, self.timeout_s)
                d.addCallback(self._answered, name, info.client_id, conn.remote)
                d.addErrback(lambda _f, g=name, c=info.client_id: self.metrics.on_running_info_failed(g, c))

    def _answered(self, reply: RemotingCommand, group: str, client_id: str, remote: str) -> None:
        info = None
        if reply.code == 0 and reply.body:
            try:
                info = ConsumerRunningInfo.from_json(reply.body)
            except CodecError:
                pass
        if info is None:
            self.metrics.on_running_info_failed(group, client_id)
        else:
            self.metrics.on_running_info(group, client_id, remote, info)
