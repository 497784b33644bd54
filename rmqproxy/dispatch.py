"""Request code → handler, with the typed custom header decoded once, here.

A handler is ``handler(request, header, connection)`` returning a response command, a Deferred
of one, or None (oneway). Unknown codes answer REQUEST_CODE_NOT_SUPPORTED naming the code (the
reference wording); a header that lacks a required field or has a malformed value, or a body
that does not parse, is answered with the error's own code (SYSTEM_ERROR for all of today's) and
a remark saying what was wrong, or closes the connection when the error says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from codec.codes import ResponseCode
from codec.command import RemotingCommand
from codec.errors import CodecError
from codec.headers import REQUEST_HEADERS

from .rejects import BAD_REQUEST, UNSUPPORTED_CODE

log = Logger()

RequestHandler = Callable[[RemotingCommand, Any, Any], Any]


class Dispatcher:
    def __init__(
        self,
        handlers: Mapping[int, RequestHandler],
        *,
        clock: Any = None,
        on_answer: Callable[[int, int, float], None] | None = None,
        unmeasured: frozenset[int] = frozenset(),
        on_reject: Callable[..., None] | None = None,
    ) -> None:
        self.handlers = dict(handlers)
        self.on_reject = on_reject if on_reject is not None else _log_reject
        self.clock = clock
        self.on_answer = on_answer
        self.unmeasured = unmeasured  # codes that report their own latency (pulls)

    def __call__(self, request: RemotingCommand, connection: Any) -> Any:
        if self.on_answer is None or request.code in self.unmeasured:
            return self._dispatch(request, connection)
        started = self.clock.seconds()
        result = self._dispatch(request, connection)
        if result.__class__ is not RemotingCommand and isinstance(result, defer.Deferred):
            return result.addCallback(self._measured, request.code, started)
        return self._measured(result, request.code, started)

    def _measured(self, response: Any, code: int, started: float) -> Any:
        """Report an answered request's latency; pass ``response`` on unchanged."""
        if isinstance(response, RemotingCommand):
            self.on_answer(code, response.code, (self.clock.seconds() - started) * 1000)
        return response

    def _dispatch(self, request: RemotingCommand, connection: Any) -> Any:
        handler = self.handlers.get(request.code)
        if handler is None:
            self.on_reject(UNSUPPORTED_CODE, "unsupported request code {code} from {conn}",
                           code=request.code, conn=connection)  # fmt: skip
            return request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        try:
            codec = REQUEST_HEADERS.get(request.code)
            header = codec.decode(request.ext_fields) if codec is not None else None
            return handler(request, header, connection)
        except CodecError as exc:
            self.on_reject(BAD_REQUEST, "bad request {code} from {conn}: {error}",
                           code=request.code, conn=connection, error=exc)  # fmt: skip
            if exc.close_connection:  # the error says the stream itself cannot be trusted
                connection.close()
                return None
            return request.response(exc.response_code, str(exc))


def _log_reject(reason: str, fmt: str, **fields: Any) -> None:
    """Without a ``Rejections`` (tests that build a bare dispatcher): log each one."""
    log.info(fmt, reason=reason, **fields)
