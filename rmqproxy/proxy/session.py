"""One client connection to a broker listener, and the upstream connection that serves it.

Why one upstream connection per client connection (docs/architecture.md, "Proxy mode"): an
Apache broker keys producers, consumers and the requests it starts by channel, and keys queue
locks by the clientId of the body. Giving each client connection its own upstream channel keeps
every one of those relations as it would be over a direct connection: GET_CONSUMER_LIST_BY_GROUP
lists each client once, NOTIFY_CONSUMER_IDS_CHANGED and CHECK_TRANSACTION_STATE reach the
connection that registered, and closing the client's connection closes its channel, so the broker
drops it from its groups and tells the others, as it would.

Every request is forwarded unchanged but for its opaque (ACL signatures cover the ext fields and
the body, never the opaque) and its answer relayed under the client's opaque. Requests the broker
starts are relayed to the client the same way, and its answer back. The proxy reads a few requests
on their way without changing them: heartbeats (replayed on a new upstream connection, so a broker
that restarted, or a connection that was re-dialed, knows the client before its next request),
queue locks (``handoff``) and pulls (``pulls``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from codec.bodies import HeartbeatData
from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.errors import CodecError

from ..net.transport import Connection
from .nodes import Node
from .pull_relay import PullRelay
from .shared import Relaying
from .upstream import LazyConnection, UpstreamError, ask, relabel

log = Logger()

#: How long a client may take to answer a request its broker started (GET_CONSUMER_RUNNING_INFO,
#: CONSUME_MESSAGE_DIRECTLY: the broker itself waits 10 s).
CLIENT_ANSWER_TIMEOUT_S = 10.0



class BrokerSession:
    """A client connection on a node's listener, relayed to that node."""

    def __init__(self, shared: Relaying, node: Node, client: Connection) -> None:
        self.shared = shared
        self.node = node
        self.client = client
        self.client_id = ""
        self.heartbeat: RemotingCommand | None = None  # the client's last HEART_BEAT, replayed on re-dial
        self.link = LazyConnection(shared.dialer, lambda: node.upstream, self.from_broker,
                                   on_connect=self._replay_heartbeat)  # fmt: skip
        self.pulls = PullRelay(self, shared)
        self.routes = self.interpreted()

    def interpreted(self) -> dict[int, Callable[[RemotingCommand], Any]]:
        """The request codes the proxy interprets on their way, and how; every other code is
        relayed as it is (``forward``)."""
        return {
            RequestCode.PULL_MESSAGE: self.pulls.pull,  # exact deadlines, kept late answers, events
            RequestCode.LITE_PULL_MESSAGE: self.pulls.pull,
            RequestCode.HEART_BEAT: self._heartbeat,  # kept for replay on a new upstream connection
            RequestCode.LOCK_BATCH_MQ: self._locked,  # remembered for the lock handoff
        }

    def __repr__(self) -> str:
        return f"<BrokerSession {self.client.remote} -> {self.node}>"

    # --- client -> broker -----------------------------------------------------------------

    def handle(self, request: RemotingCommand) -> Any:
        """A client request: answered by the upstream broker (a Deferred, or written when it comes),
        or None if oneway."""
        return self.routes.get(request.code, self.forward)(request)

    def forward(self, request: RemotingCommand, timeout_s: float | None = None) -> defer.Deferred | None:
        """Send ``request`` upstream; a Deferred of the answer under the client's opaque (an
        error answer with a remark if the broker cannot be reached or does not answer)."""
        if request.is_oneway:
            self.link.get().addCallbacks(lambda conn: conn.send_oneway(request), self._oneway_lost, errbackArgs=(request,))
            return None
        started = self.shared.clock.seconds()
        timeout_s = timeout_s or self.shared.timeout_s
        conn = self.link.conn
        if conn is not None and conn.connected:  # the usual case, without Deferreds: see ``_relay``
            self.client.in_flight += 1
            conn.call(request, timeout_s, self._relay, request, started)
            return None
        d = self.link.get().addCallback(ask, request, timeout_s)
        return d.addCallbacks(self._relayed, self.failed, callbackArgs=(request, started), errbackArgs=(request,))

    def _relay(self, result: RemotingCommand | Exception, request: RemotingCommand, started: float) -> None:
        """The broker's answer (or its absence) to a request forwarded on an open connection,
        written to the client; it counts as in flight until then, as a Deferred answer would."""
        client = self.client
        client.in_flight -= 1
        if isinstance(result, Exception):
            client.write_command(self.unanswered(request, str(result)))
        else:
            client.write_command(self._relayed(result, request, started))

    def _relayed(self, answer: RemotingCommand, request: RemotingCommand, started: float) -> RemotingCommand:
        elapsed_ms = (self.shared.clock.seconds() - started) * 1000
        self.shared.answered(self.node, request.code, answer.code, elapsed_ms)
        return relabel(answer, request.opaque)

    def failed(self, failure: Any, request: RemotingCommand) -> RemotingCommand:
        """``unanswered`` as an errback of an UpstreamError."""
        failure.trap(UpstreamError)
        return self.unanswered(request, failure.getErrorMessage())

    def unanswered(self, request: RemotingCommand, reason: str) -> RemotingCommand:
        """The answer a client gets when its broker could not answer (SYSTEM_ERROR: producers
        retry it on another broker)."""
        return request.response(
            ResponseCode.SYSTEM_ERROR, f"rmqproxy: broker {self.node.label} ({self.node.upstream}) did not answer: {reason}"
        )

    def _oneway_lost(self, failure: Any, request: RemotingCommand) -> None:
        failure.trap(UpstreamError)
        log.info("{session}: oneway request {code} not forwarded: {error}", session=self, code=request.code,
                 error=failure.getErrorMessage())  # fmt: skip

    def _heartbeat(self, request: RemotingCommand) -> Any:
        """Keep the heartbeat (and learn the clientId from the first), then forward it."""
        self.heartbeat = request
        if not self.client_id:
            try:
                client_id = HeartbeatData.from_json(request.body).client_id or ""
            except CodecError:
                client_id = ""  # the broker will say what is wrong with it
            if client_id:
                self._joined(client_id)
        return self.forward(request)

    def _locked(self, request: RemotingCommand) -> Any:
        """Remember a queue lock for the handoff (a lock before any heartbeat names the client), then forward it."""
        client_id = self.shared.handoff.locked(self, request)
        if client_id and not self.client_id:
            self._joined(client_id)
        return self.forward(request)

    def _joined(self, client_id: str) -> None:
        self.client_id = client_id
        self.shared.handoff.joined(self)

    def _replay_heartbeat(self, conn: Connection) -> defer.Deferred | None:
        """A new upstream connection: register the client on it before anything else goes."""
        if self.heartbeat is None:
            return None
        d = ask(conn, self.heartbeat, self.shared.timeout_s)
        return d.addErrback(lambda f: log.info("{session}: heartbeat replay failed: {error}", session=self,
                                               error=f.getErrorMessage()))  # fmt: skip

    # --- broker -> client -----------------------------------------------------------------

    def from_broker(self, command: RemotingCommand, _upstream: Connection) -> defer.Deferred | None:
        """A request the broker started (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
        GET_CONSUMER_RUNNING_INFO...): to the client, and its answer back."""
        if command.is_oneway:
            self.client.send_oneway(command)
            return None

        def unanswered(failure: Any) -> RemotingCommand:
            return command.response(ResponseCode.SYSTEM_ERROR,
                                    f"rmqproxy: the client did not answer: {failure.getErrorMessage()}")  # fmt: skip

        d = self.client.request(command, CLIENT_ANSWER_TIMEOUT_S)
        return d.addCallbacks(relabel, unanswered, callbackArgs=(command.opaque,))

    # --- end ------------------------------------------------------------------------------

    def closed(self) -> None:
        """The client's connection closed: end its pulls; its upstream connection closes now,
        or once its queue locks are released (``handoff``)."""
        self.pulls.close()
        if not self.shared.handoff.left(self):
            self.link.close()
