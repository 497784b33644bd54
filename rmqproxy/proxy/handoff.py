"""Queue locks of a client that is gone, released upstream in its name (``lockReleaseOnDisconnect``).

An Apache broker keeps a queue lock for its clientId until 60 s after the last renewal, so when
an orderly consumer dies its queues stand still for up to a minute. With
``lockReleaseOnDisconnect=immediate`` the proxy ends that wait: it remembers each client's last
LOCK_BATCH_MQ requests per (broker, group) (a client locks all its queues every 20 s, and each
queue a rebalance gives it on its own; a request whose queues a later one covers is forgotten),
and when the client's last connection to the proxy closes it sends each of them upstream again
as UNLOCK_BATCH_MQ. The broker unlocks by the clientId and
queues of the body, whatever the channel; an ACL signature covers the ext fields and the body,
not the request code, so the replay is signed as the client signed its lock. Only after the
unlocks are answered are the client's upstream connections closed: closing them is what makes
the broker tell the group's other consumers to rebalance, and they must find the queues free.

A client that closes one connection and keeps others is still alive: its locks stay, and the
closed connection's upstream channel closes after ``LINGER_S``.

With ``--workers N`` a client's connections (one per broker) may sit in different workers, and
only the supervisor sees them all: a worker given ``peers`` (``worker.WorkerLink``) tells it
when a client's first connection here has joined and when its last one here has left, and
releases the client's locks when the supervisor says the client is gone from every worker
(``released``), or, if it is not within ``LINGER_S``, closes the channel and forgets the locks
(the client is alive elsewhere, as above).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from twisted.internet import defer
from twisted.logger import Logger

from codec.bodies import LockBatchRequestBody
from codec.codes import RequestCode
from codec.command import RemotingCommand
from codec.errors import CodecError

from .nodes import Node
from .upstream import LazyConnection, ask

log = Logger()

#: How long a closed session's upstream channel waits for the client's other connections to close.
LINGER_S = 1.0
#: Lock requests remembered per client (brokers x groups x queues gained one by one; more is a
#: client sending junk, whose further requests are not remembered).
MAX_LOCKS_PER_CLIENT = 1024

_Queues = frozenset  # of (topic, broker name, queue id)


class LockHolder(Protocol):
    """What the handoff needs of a client's session (``session.BrokerSession``)."""

    client_id: str
    node: Node
    link: LazyConnection


class Peers(Protocol):
    """The other workers of a proxy, through its supervisor (``worker.WorkerLink``)."""

    def live(self, client_id: str) -> None: ...

    def gone(self, client_id: str) -> None: ...


class LockHandoff:
    def __init__(self, reactor: Any, *, immediate: bool, timeout_s: float, on_release: Any = None,
                 peers: Peers | None = None) -> None:  # fmt: skip
        self.reactor = reactor
        self.immediate = immediate
        self.timeout_s = timeout_s
        self.on_release = on_release  # (client id, queues unlocked) for metrics and tests
        self.peers = peers  # with workers: who says whether a client is gone from all of them
        self._live: dict[str, set[LockHolder]] = {}  # client id -> its open sessions
        # client id -> (broker, broker id, group) -> lock requests no later one covers, oldest first
        self._locks: dict[str, dict[tuple[str, int, str], list[tuple[_Queues, RemotingCommand]]]] = {}
        self._counts: dict[str, int] = {}  # client id -> requests in ``_locks``
        self._parked: dict[str, list[LockHolder]] = {}  # closed sessions waiting for the release (or ``LINGER_S``)
        self._releasing = 0  # releases whose unlocks are still unanswered
        self._settled: list[defer.Deferred] = []  # ``settled`` callers waiting for them

    def joined(self, session: LockHolder) -> None:
        """``session`` told its clientId (its first heartbeat)."""
        live = self._live.setdefault(session.client_id, set())
        if not live and self.peers is not None:
            self.peers.live(session.client_id)
        live.add(session)

    def locked(self, session: LockHolder, request: RemotingCommand) -> str:
        """A LOCK_BATCH_MQ on its way upstream: remember it as the client's latest for that group.
        Returns the clientId it was remembered under ("" when it was not): a session that has
        none yet (locks before any heartbeat) takes it, and then ``joined``."""
        if not self.immediate:
            return ""
        try:
            body = LockBatchRequestBody.from_json(request.body)
        except CodecError:
            return ""
        client_id = body.client_id or ""
        if not client_id or not body.consumer_group:
            return ""
        if session.client_id and client_id != session.client_id:
            return ""  # one client per connection: a body naming another is not remembered
        key = (session.node.name, session.node.broker_id, body.consumer_group)
        queues = frozenset((mq.topic, mq.broker_name, mq.queue_id) for mq in body.mq_set)
        requests = self._locks.setdefault(client_id, {}).setdefault(key, [])
        kept = [(q, r) for q, r in requests if not q <= queues]  # a request this one covers is replaced
        count = self._counts.get(client_id, 0) - len(requests) + len(kept)
        if count < MAX_LOCKS_PER_CLIENT:
            kept.append((queues, request))
            count += 1
        requests[:] = kept
        self._counts[client_id] = count
        return client_id

    def left(self, session: LockHolder) -> bool:
        """``session``'s client connection closed. True when this keeps its upstream channel open
        for now (it closes once the client's locks are released, or after ``LINGER_S``)."""
        client_id = session.client_id
        live = self._live.get(client_id)
        if live is not None:
            live.discard(session)
            if not live:
                del self._live[client_id]
                if self.peers is not None:
                    self.peers.gone(client_id)
        if not self.immediate or client_id not in self._locks:
            return False
        self._parked.setdefault(client_id, []).append(session)
        if client_id in self._live or self.peers is not None:  # connected elsewhere, or the supervisor says
            self.reactor.callLater(LINGER_S, self._linger_over, client_id, session)
        else:
            self._release(client_id)
        return True

    def released(self, client_id: str) -> None:
        """The supervisor says ``client_id`` is gone from every worker: release its locks here."""
        if client_id not in self._live and client_id in self._parked:
            self._release(client_id)

    def _linger_over(self, client_id: str, session: LockHolder) -> None:
        parked = self._parked.get(client_id)
        if parked is not None and session in parked:
            parked.remove(session)
            if not parked:
                del self._parked[client_id]
            session.link.close()
        if self.peers is not None and client_id not in self._live and client_id not in self._parked:
            self._locks.pop(client_id, None)  # alive in another worker: what it locked here cannot be released
            self._counts.pop(client_id, None)
        self._settle()

    def _release(self, client_id: str) -> None:
        """The client is gone: unlock its queues everywhere, then close its channels."""
        parked = self._parked.pop(client_id, [])
        locks = self._locks.pop(client_id, {})
        self._counts.pop(client_id, None)
        by_node = {(s.node.name, s.node.broker_id): s for s in parked if s.link.conn is not None and s.link.conn.connected}
        sent = []
        for (name, broker_id, group), requests in locks.items():
            session = by_node.get((name, broker_id))
            if session is None:
                continue  # no channel of the client to that broker is left: its lock expires there
            for _, lock in requests:
                unlock = dataclasses.replace(lock, code=RequestCode.UNLOCK_BATCH_MQ)
                d = ask(session.link.conn, unlock, self.timeout_s)
                d.addErrback(lambda f, g=group, n=name: log.warn("unlocking {group} on {node} for a departed client "
                                                                 "failed: {error}", group=g, node=n,
                                                                 error=f.getErrorMessage()))  # fmt: skip
                sent.append(d)
        if sent:
            log.info("client {client} left: released its queue locks upstream ({n} unlock requests)",
                     client=client_id, n=len(sent))  # fmt: skip
        if self.on_release is not None:
            self.on_release(client_id, len(sent))

        def close_all(_: Any) -> None:
            for session in parked:
                session.link.close()
            self._releasing -= 1
            self._settle()

        self._releasing += 1
        defer.DeferredList(sent).addCallback(close_all)

    def _settle(self) -> None:
        if not self._releasing and not (self.peers is not None and self._parked):
            waiting, self._settled = self._settled, []
            for d in waiting:
                d.callback(None)

    def settled(self) -> defer.Deferred:
        """Fires once every departed client's unlocks are answered (or failed) and its channels
        closed (with workers, also once every closed session's wait for the supervisor's word is
        over): what a stopping proxy waits for after closing its clients."""
        if not self._releasing and not (self.peers is not None and self._parked):
            return defer.succeed(None)
        waiting: defer.Deferred = defer.Deferred()
        self._settled.append(waiting)
        return waiting
