"""One client connection to a broker listener, and the upstream connection that serves it.

Why one upstream connection per client connection (docs/architecture.md, "Proxy mode"): an
Apache broker keys producers, consumers and the requests it starts by channel, and keys queue
locks by the clientId of the body. Giving each client connection its own upstream channel keeps
every one of those relations as it would be over a direct connection: GET_CONSUMER_LIST_BY_GROUP
lists each client once, NOTIFY_CONSUMER_IDS_CHANGED and CHECK_TRANSACTION_STATE reach the
connection that registered, and closing the client's connection closes its channel, so the broker
drops it from its groups and tells the others, as it would.

A request the proxy does not interpret is passed on as the bytes it came in, under the client's own
opaque (the upstream connection is the client's alone), and its answer comes back as bytes: only
its header is read, to validate it (no frame goes upstream that the broker would choke on) and to
learn its code, flag and opaque (``codec.command.peek``; of an answer, only those three where they
stand: ``peek_answer``). ACL signatures and bodies reach the broker byte for byte. The proxy's own
requests on that connection (pulls, a replayed heartbeat, unlocks) are numbered where a client's
counter does not go (``PROXY_FIRST_OPAQUE``), and never under an opaque still awaited; a client
request whose opaque is one of those in flight is decoded and renumbered instead (``forward``), as
is one sent before the upstream connection is up. Requests the broker starts are relayed to the
client renumbered, and its answer back. The proxy reads a few requests on their way without
changing them: heartbeats (replayed on a new upstream connection, so a broker that restarted, or a
connection that was re-dialed, knows the client before its next request), queue locks (``handoff``)
and pulls (``pulls``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from functools import partial

from codec.bodies import HeartbeatData
from codec.codes import FLAG_ONEWAY, FLAG_RESPONSE, RequestCode, ResponseCode
import codec.command as codec_command  # its hot names: codec.implementation rebinds them
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
                                   on_connect=self.upstream_ready)  # fmt: skip
        self.pulls = PullRelay(self, shared)
        self.routes = self.interpreted()
        self._passed = self._passed_failed  # one bound method: the mark of a request passed on as bytes
        client.shortcut = self._from_client

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

    def _from_client(self, payload: bytes) -> bool:
        """A client frame, passed upstream as bytes unless the proxy interprets its code, it is an
        answer, the upstream connection is not up, or its opaque is one of the proxy's own in
        flight (False: it is decoded and ``handle``d). A malformed header raises CodecError."""
        code, flag, opaque = codec_command.peek(payload)
        if flag & FLAG_RESPONSE or code in self.routes:
            return False
        conn = self.link.conn
        if conn is None or not conn.connected:
            return False
        if flag & FLAG_ONEWAY:
            conn.writer.write_frame(payload)
            return True
        client = self.client
        if client.in_flight >= client.max_in_flight:
            return False  # refused SYSTEM_BUSY by the connection
        started = self.shared.clock.seconds()
        if not conn.outbound.relay(payload, opaque, code, self.shared.timeout_s, self._passed, opaque, payload[0],
                                   started):  # fmt: skip
            return False
        client.in_flight += 1
        return True

    def _from_broker(self, conn: Connection, payload: bytes) -> bool:
        """An upstream frame: the answer to a request passed on as bytes goes to the client as
        bytes; anything else (an answer to the proxy's own request, a request the broker starts)
        is decoded as usual (False)."""
        code, flag, opaque = codec_command.peek_answer(payload)  # the broker writes valid headers
        if not flag & FLAG_RESPONSE:
            return False
        awaited = conn.peer.awaited(opaque)
        if awaited is None or awaited.context[0] is not self._passed:
            return False
        conn.peer.forget(opaque)
        started = awaited.context[1][2]
        client = self.client
        client.in_flight -= 1
        self.shared.answered(self.node, awaited.code, code, (self.shared.clock.seconds() - started) * 1000)
        if client.writer.paused:  # within the bounds on what a client that is not reading may cost
            client.write_command(RemotingCommand.decode(payload))
        else:
            client.writer.write_frame(payload)
        return True

    def _passed_failed(self, result: RemotingCommand | Exception, opaque: int, serialize_type: int,
                       _started: float) -> None:  # fmt: skip
        """A request passed on as bytes got no answer (the broker timed out or its connection
        closed): the client gets SYSTEM_ERROR with the reason. (An answer itself would be taken
        by ``_from_broker``; one that reaches here decoded is relayed as it is.)"""
        self.client.in_flight -= 1
        if isinstance(result, Exception):
            self.client.write_command(self._error_answer(opaque, serialize_type, str(result)))
        else:
            self.client.write_command(result)

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
        return self._error_answer(request.opaque, request.serialize_type, reason)

    def _error_answer(self, opaque: int, serialize_type: int, reason: str) -> RemotingCommand:
        return RemotingCommand(
            ResponseCode.SYSTEM_ERROR, opaque=opaque, flag=FLAG_RESPONSE, serialize_type=serialize_type,
            remark=f"rmqproxy: broker {self.node.label} ({self.node.upstream}) did not answer: {reason}",
        )  # fmt: skip

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

    def upstream_ready(self, conn: Connection) -> defer.Deferred | None:
        """A new upstream connection: its answers may come back as bytes (``_from_broker``), the
        client is not read while the broker does not read what is forwarded (so what waits for
        the broker is bounded by one socket buffer and one read), and the client is registered
        on it (its last heartbeat) before anything else goes."""
        conn.shortcut = partial(self._from_broker, conn)
        conn.on_pause = self.client.hold_back  # a broker not reading what is forwarded: stop reading the client
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
