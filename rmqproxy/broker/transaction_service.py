"""Transactional messages: half messages, END_TRANSACTION and the check-back of undecided ones.

A send whose ``TRAN_MSG`` property is true is a prepared (half) message. It is stored in
``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its real topic and queue in ``REAL_TOPIC`` /
``REAL_QID``, where no consumer of the real topic sees it. END_TRANSACTION (37) names it by
commit-log offset: a commit stores a copy in the real topic (transaction bits COMMIT, its half
message's queue offset in ``TRAN_PREPARED_QUEUE_OFFSET``), a rollback nothing there. Both are
recorded in op records in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, tag ``d``, written in batches
as 5.x brokers write them (body the half queue offsets, each followed by a comma; ``KEYS`` the
transactions' keys), at most ``OP_BATCH`` decisions or ``OP_FLUSH_S`` apart.

A transaction is known by the half message's ``UNIQ_KEY``, so each is decided once: a second
decision, or one naming an older copy of the same half message, changes nothing.

Every ``transactionCheckInterval`` the half queue is scanned from the check group's offset
(``CID_RMQ_SYS_TRANS``). A half message older than ``transactionTimeOut`` (or its own
``CHECK_IMMUNITY_TIME_IN_SECONDS``) and still undecided is stored again with
``TRANSACTION_CHECK_TIMES`` one higher, and CHECK_TRANSACTION_STATE (39) naming that copy goes
one-way to a live producer of its group (``PGROUP``); the producer answers with END_TRANSACTION.
After ``transactionCheckMax`` checks it is moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` and no longer
checked. Copies are never deleted; the check group's offset is what moves.

Whether a transaction is decided: for a half message of this run at or past the check offset,
the in-memory decisions say it all. For the others (a previous run's, or behind the check offset)
the key index is asked, once per batch of keys: an op record with the key, or a committed copy
with the key and ``TRAN_PREPARED_QUEUE_OFFSET`` in the real topic. So a kill -9 before a commit's
op record was written does not commit it twice when it is checked back: its copy says it is
decided. A rollback whose op record was lost is checked back and rolled back again, harmlessly.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Hashable
from typing import Any

from twisted.logger import Logger

from codec.codes import RequestCode, ResponseCode
from codec import message as _message  # encode_message through it: codec.implementation rebinds it
from codec.command import RemotingCommand
from codec.headers import CheckTransactionStateRequestHeader
from codec.message import (
    BORNHOST_V6_FLAG,
    STOREHOST_V6_FLAG,
    TRANSACTION_TYPE_MASK,
    HostPort,
    Message,
    decode_message,
)

from .clients import ClientRegistry
from .store import MessageStore, PutResult, PutTicket
from .topics import PERM_READ, PERM_WRITE, TopicTable
from ..core.names import CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC

log = Logger()

CHECK_GROUP = "CID_RMQ_SYS_TRANS"
OP_TAG = "d"

TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED = 0x4
TRANSACTION_COMMIT = 0x8
TRANSACTION_ROLLBACK = 0xC
_DECISIONS = {TRANSACTION_COMMIT: "commit", TRANSACTION_ROLLBACK: "rollback"}

#: Half messages one check pass looks at, so that a long backlog never stalls the reactor.
MAX_CHECKED_PER_PASS = 2000
#: Decisions kept in memory; past it the oldest are left to the key index.
MAX_DECISIONS_IN_MEMORY = 100_000
#: Decisions per op record, and the longest a decision waits for its op record.
OP_BATCH = 64
OP_FLUSH_S = 0.1
_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG


def is_prepared(properties: dict[str, str]) -> bool:
    """A prepared message, as the broker tells (Java ``Boolean.parseBoolean`` of ``TRAN_MSG``)."""
    value = properties.get("TRAN_MSG")
    return value is not None and value.lower() == "true"


def to_half(msg: Message) -> Message:
    """``msg`` made a half message in place: real topic and queue kept in properties, transaction
    bits cleared (so it is dispatched like any message), ``DELAY`` dropped (a delayed prepare
    would otherwise be parked instead)."""
    msg.properties["REAL_TOPIC"] = msg.topic
    msg.properties["REAL_QID"] = str(msg.queue_id)
    msg.properties.pop("DELAY", None)
    msg.sys_flag &= ~TRANSACTION_TYPE_MASK
    msg.topic = HALF_TOPIC
    msg.queue_id = 0
    return msg


def _key(msg: Message) -> str:
    return msg.properties.get("UNIQ_KEY") or f"@{msg.physical_offset}"


@dataclasses.dataclass(frozen=True)
class TransactionSettings:
    timeout_ms: int = 6000
    check_interval_ms: int = 60_000
    check_max: int = 15


class TransactionService:
    """Half messages, their decisions and their check-back (see the module doc)."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        clients: ClientRegistry,
        settings: TransactionSettings,
        store_host: HostPort,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.topics = topics
        self.clients = clients
        self.settings = settings
        self.store_host = store_host
        self.clock = clock
        # transactions decided while a copy of their half message may lie ahead of the check
        # offset: key -> (the half queue's end when decided: no copy is made after a decision,
        # the offset of the half message the decision named); oldest first
        self._decided: dict[str, tuple[int, int]] = {}
        self._decided_at: set[int] = set()  # those offsets: a check pass steps over them unread
        self._forgotten_below = 0  # decisions of half messages below this may have left memory
        self._fresh_from: int | None = None  # the half queue's end when this run first used it
        self._ops: list[Message] = []  # decided half messages whose op record is not yet written
        self._round_robin = itertools.count()
        self.counts = {"prepared": 0, "commit": 0, "rollback": 0, "checked": 0, "discarded": 0, "unanswered": 0}

    # --- prepare ---------------------------------------------------------------------------

    def prepared(self) -> None:
        """A half message was stored (counted; the half and op topics get their configs)."""
        self.counts["prepared"] += 1
        self._fresh()
        if self.topics.get(HALF_TOPIC) is None:
            self._ensure_topics()

    def _ensure_topics(self) -> None:
        for topic in (HALF_TOPIC, OP_TOPIC):
            self.topics.ensure(topic, 1, PERM_READ | PERM_WRITE)

    # --- END_TRANSACTION -------------------------------------------------------------------

    def end(self, header: Any) -> tuple[int, str | None] | tuple[PutTicket, Callable[[PutResult], tuple[int, str | None]]]:
        """Decide the transaction END_TRANSACTION names: (code, remark), or for a commit the put
        of the real message and what makes (code, remark) of its result once it is stored."""
        decision = header.commit_or_rollback
        if decision not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK):
            return ResponseCode.SYSTEM_ERROR, "commitOrRollback field wrong"
        if decision == TRANSACTION_NOT_TYPE:  # the producer does not know yet: it is checked back later
            return ResponseCode.SUCCESS, "transaction state unknown; the broker will check back"
        half = self.store.look_message(header.commit_log_offset)
        if half is None or half.topic != HALF_TOPIC:
            return ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
        if half.properties.get("PGROUP") != header.producer_group:
            return ResponseCode.SYSTEM_ERROR, "The producer group wrong"
        if half.queue_offset != header.tran_state_table_offset:
            return ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"
        if half.physical_offset != header.commit_log_offset:
            return ResponseCode.SYSTEM_ERROR, "The commit log offset wrong"
        key = _key(half)
        if self._decided_of([half]):
            log.info("transaction {key} of {group} is already decided: {decision} ignored",
                     key=key, group=header.producer_group, decision=_DECISIONS[decision])  # fmt: skip
            return ResponseCode.SUCCESS, "transaction already decided"
        self._remember(key, half.queue_offset)
        if decision == TRANSACTION_ROLLBACK:
            self._write_op(half)
            self.counts["rollback"] += 1
            return ResponseCode.SUCCESS, None
        return self.store.put(self._committed(half)), lambda result: self._after_commit(half, key, result)

    def _after_commit(self, half: Message, key: str, result: PutResult) -> tuple[int, str | None]:
        if not result.ok:
            self._forget(key)  # not stored: the producer may decide again, or be checked
            return ResponseCode.SYSTEM_ERROR, f"the committed message was not stored: {result.status.name} {result.remark}"
        self._write_op(half)
        self.counts["commit"] += 1
        return ResponseCode.SUCCESS, None

    def _committed(self, half: Message) -> Message:
        """The real-topic copy of a half message, transaction bits COMMIT."""
        props = dict(half.properties)
        topic = props.pop("REAL_TOPIC", "")
        queue = props.pop("REAL_QID", "0")
        props.pop("TRAN_MSG", None)
        props.pop("TRANSACTION_CHECK_TIMES", None)
        props["TRAN_PREPARED_QUEUE_OFFSET"] = str(half.queue_offset)
        return Message(
            topic, half.body, props, queue_id=int(queue) if queue.isdigit() else 0, flag=half.flag,
            sys_flag=(half.sys_flag & ~(TRANSACTION_TYPE_MASK | _HOST_FLAGS)) | TRANSACTION_COMMIT,
            born_timestamp=half.born_timestamp, born_host=half.born_host, reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.physical_offset,
        )  # fmt: skip

    def _write_op(self, half: Message) -> None:
        """Record a decision; its op record is written with the batch (``flush_ops``)."""
        self._ops.append(half)
        if len(self._ops) >= OP_BATCH:
            self.flush_ops()

    def flush_ops(self) -> None:
        """Write the op record of the decisions made since the last (periodic, and at stop)."""
        if not self._ops:
            return
        batch, self._ops = self._ops, []
        op = Message(
            OP_TOPIC, "".join(f"{h.queue_offset}," for h in batch).encode(),
            {"TAGS": OP_TAG, "KEYS": " ".join(_key(h) for h in batch)}, queue_id=0,
            born_timestamp=int(self.clock() * 1000), born_host=self.store_host,
        )  # fmt: skip
        result = self.store.put(op).result
        if result is not None and not result.ok:
            log.error("transaction op record of {n} decisions not stored: {status} {remark}", n=len(batch),
                      status=result.status.name, remark=result.remark)  # fmt: skip

    # --- check-back ------------------------------------------------------------------------

    def check(self) -> int:
        """One pass over the half queue (periodic): check back or discard what is undecided
        past its timeout; returns how many producers were asked."""
        now_ms = int(self.clock() * 1000)
        scan, end = self._check_offset(), self.store.max_offset(HALF_TOPIC, 0)
        candidates = []  # offsets not known decided: read, at most MAX_CHECKED_PER_PASS a pass
        while scan < end and len(candidates) < MAX_CHECKED_PER_PASS:
            if scan not in self._decided_at:
                candidates.append(scan)
            scan += 1
        halves = [(at, self.store.message_at(HALF_TOPIC, 0, at)) for at in candidates]
        decided = self._decided_of([half for _, half in halves if half is not None])
        offset, asked = scan, 0
        for at, half in halves:
            if half is not None and _key(half) not in decided:
                if now_ms - half.born_timestamp < self._immunity_ms(half):
                    offset = at  # too young; so, nearly always, is everything after it
                    break
                if self._check_or_discard(half):
                    asked += 1
        if offset != (self.store.offsets.query(CHECK_GROUP, HALF_TOPIC, 0) or 0):  # no entry until there is progress
            self.store.offsets.commit(CHECK_GROUP, HALF_TOPIC, 0, offset)
        self._forget_passed(offset)
        return asked

    def _immunity_ms(self, half: Message) -> int:
        text = half.properties.get("CHECK_IMMUNITY_TIME_IN_SECONDS", "")
        return int(text) * 1000 if text.isdigit() else self.settings.timeout_ms

    def _check_or_discard(self, half: Message) -> bool:
        times_text = half.properties.get("TRANSACTION_CHECK_TIMES", "0")
        times = int(times_text) if times_text.isdigit() else 0
        key = _key(half)
        if times >= self.settings.check_max:
            self._discard(half, key)
            return False
        copy = self._copy(half, {**half.properties, "TRANSACTION_CHECK_TIMES": str(times + 1)}, HALF_TOPIC)
        result = self.store.put(copy).result
        if result is not None and not result.ok:
            log.warn("transaction {key}: its half message could not be stored again for a check ({status})",
                     key=key, status=result.status.name)  # fmt: skip
            return False
        self.counts["checked"] += 1
        return self._ask(copy, key)

    def _discard(self, half: Message, key: str) -> None:
        """Checked ``transactionCheckMax`` times: kept in TRANS_CHECK_MAX_TIME_TOPIC, no longer checked."""
        self.topics.ensure(CHECK_MAX_TOPIC, 1, PERM_READ | PERM_WRITE)
        self.store.put(self._copy(half, dict(half.properties), CHECK_MAX_TOPIC))
        self.counts["discarded"] += 1
        log.error("transaction {key} of {group} was checked {n} times without a decision: discarded to {topic}",
                  key=key, group=half.properties.get("PGROUP", ""), n=self.settings.check_max,
                  topic=CHECK_MAX_TOPIC)  # fmt: skip

    def _copy(self, half: Message, props: dict[str, str], topic: str) -> Message:
        return Message(
            topic, half.body, props, queue_id=0, flag=half.flag, sys_flag=half.sys_flag & ~_HOST_FLAGS,
            born_timestamp=half.born_timestamp, born_host=half.born_host, reconsume_times=half.reconsume_times,
        )  # fmt: skip

    def _ask(self, copy: Message, key: str) -> bool:
        """CHECK_TRANSACTION_STATE for ``copy`` (stored, offsets set) to a producer of its group."""
        group = copy.properties.get("PGROUP", "")
        conn = self._producer(group)
        if conn is None:
            self.counts["unanswered"] += 1
            log.warn("transaction {key}: no live producer of group {group} to check back", key=key, group=group)
            return False
        shown = dataclasses.replace(copy, properties=dict(copy.properties))
        shown.topic = shown.properties.get("REAL_TOPIC", copy.topic)
        real_queue = shown.properties.get("REAL_QID", "0")
        shown.queue_id = int(real_queue) if real_queue.isdigit() else 0
        header = CheckTransactionStateRequestHeader.CODEC.make(
            topic=HALF_TOPIC, tran_state_table_offset=copy.queue_offset, commit_log_offset=copy.physical_offset,
            msg_id=key, transaction_id=key, offset_msg_id=copy.offset_msg_id,
        )  # fmt: skip
        conn.send_oneway(RemotingCommand(
            code=RequestCode.CHECK_TRANSACTION_STATE, ext_fields=header.to_ext(), body=_message.encode_message(shown),
        ))  # fmt: skip
        return True

    def _producer(self, group: str) -> Hashable | None:
        members = [conn for conn in self.clients.producers.get(group, {}) if getattr(conn, "connected", True)]
        if not members:
            return None
        return members[next(self._round_robin) % len(members)]

    # --- progress --------------------------------------------------------------------------

    def _check_offset(self) -> int:
        stored = self.store.offsets.query(CHECK_GROUP, HALF_TOPIC, 0)
        return max(stored or 0, self.store.min_offset(HALF_TOPIC, 0))

    def _fresh(self) -> int:
        """The half queue offset from which every half message was stored in this run."""
        if self._fresh_from is None:
            self._fresh_from = self.store.max_offset(HALF_TOPIC, 0)
        return self._fresh_from

    def _decided_of(self, halves: list[Message]) -> set[str]:
        """The keys of ``halves`` whose transaction has an op record. For a half message of this
        run at or past the check offset the in-memory decisions say it all (a copy is made only
        of an undecided one); the others are looked up in the op topic's key index, in one pass
        (a pass reads every index file)."""
        decided = {_key(h) for h in halves if _key(h) in self._decided}
        live_from = max(self._fresh(), self._check_offset(), self._forgotten_below)
        older = [h for h in halves if h.queue_offset < live_from and _key(h) not in decided]
        if older:
            decided |= set(self.store.messages_by_keys(OP_TOPIC, {_key(h) for h in older}, 1))
            by_topic: dict[str, set[str]] = {}
            for half in older:
                if _key(half) not in decided and half.properties.get("REAL_TOPIC"):
                    by_topic.setdefault(half.properties["REAL_TOPIC"], set()).add(_key(half))
            for topic, keys in by_topic.items():
                for key, records in self.store.messages_by_keys(topic, keys, 4).items():
                    if any("TRAN_PREPARED_QUEUE_OFFSET" in decode_message(r)[0].properties for r in records):
                        decided.add(key)
        return decided

    def _remember(self, key: str, half_offset: int) -> None:
        """Keep a decision in memory, within MAX_DECISIONS_IN_MEMORY: past it the oldest goes,
        and the key index answers for half messages below where its copies ended."""
        self._decided[key] = (self.store.max_offset(HALF_TOPIC, 0), half_offset)
        self._decided_at.add(half_offset)
        while len(self._decided) > MAX_DECISIONS_IN_MEMORY:
            oldest = next(iter(self._decided))
            self._forgotten_below = max(self._forgotten_below, self._decided[oldest][0])
            self._forget(oldest)

    def _forget(self, key: str) -> None:
        entry = self._decided.pop(key, None)
        if entry is not None:
            self._decided_at.discard(entry[1])

    def _forget_passed(self, check_offset: int) -> None:
        """Drop in-memory decisions once no copy of theirs is ahead of ``check_offset`` (the op
        topic's key index answers for half messages behind it)."""
        for key in [k for k, (end, _) in self._decided.items() if end <= check_offset]:
            self._forget(key)


__all__ = ["TransactionService", "TransactionSettings", "is_prepared", "to_half"]
