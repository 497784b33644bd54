"""END_TRANSACTION (37): a producer commits or rolls back a half message (docs/protocol.md, Transactions).

Java producers send it one-way, so its answer is never read: a decision the broker cannot apply
(unknown offset, wrong group) is also a ``transaction_not_applied`` rejection, counted in
``rmqproxy_rejected_requests_total`` and logged at the rejections' bounded rate, and a one-way one
is answered None, so the connection does not count it again as ``oneway_refused``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand

from ...net.dispatch import Route
from ...net.rejects import TRANSACTION_NOT_APPLIED
from ..store import PutResult
from ..transaction_service import TransactionService
from .send import when_stored

class TransactionProcessor:
    def __init__(self, transactions: TransactionService, on_reject: Callable[..., Any]) -> None:
        self.transactions = transactions
        self.on_reject = on_reject

    def routes(self) -> list[Route]:
        """This processor's entries of the dispatch table."""
        return [Route(RequestCode.END_TRANSACTION, self.end_transaction)]

    def end_transaction(self, request: RemotingCommand, header, conn) -> RemotingCommand | defer.Deferred:
        outcome = self.transactions.end(header)
        if isinstance(outcome[0], int):
            return self._answer(request, header, conn, *outcome)
        ticket, finish = outcome

        def stored(request: RemotingCommand, result: PutResult) -> RemotingCommand:
            return self._answer(request, header, conn, *finish(result))

        return when_stored(ticket, stored, request)

    def _answer(self, request: RemotingCommand, header, conn, code: int, remark: str | None) -> RemotingCommand | None:
        if code != ResponseCode.SUCCESS:
            self.on_reject(TRANSACTION_NOT_APPLIED, "END_TRANSACTION from {conn} ({group}, half offset {offset}) not "
                           "applied: {remark}", conn=conn, group=header.producer_group,
                           offset=header.tran_state_table_offset, remark=remark)  # fmt: skip
            if request.is_oneway:
                return None
        return request.response(code, remark)
