"""Request code → handler, with the typed custom header decoded once, here.

Each processor declares its own entries next to its handlers (``routes()``, a list of ``Route``);
the server hands them all to one ``Dispatcher``. A handler is ``handler(request, header,
connection)`` returning a response command, a Deferred of one, or None (oneway). Unknown codes answer REQUEST_CODE_NOT_SUPPORTED naming the code (the
reference wording); a header that lacks a required field or has a malformed value, or a body
that does not parse, is answered with the error's own code (SYSTEM_ERROR for all of today's) and
a remark saying what was wrong, or closes the connection when the error says so. Both are counted
as rejections (``unsupported_code``, ``bad_request``); a oneway request refused so is answered None,
as is any a handler refuses under a reason of its own, or the connection would count it a second
time as ``oneway_refused`` (``transport.py``). With an ``access`` check (``acl.AccessControl``) every
request passes it first, unknown codes included, as every request passes a reference broker's
ACL hook: a denied one is answered SYSTEM_ERROR with the denial's remark and counted under its
reason (``acl_*``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
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


@dataclasses.dataclass(frozen=True)
class Route:
    """One request code's entry in the dispatch table."""

    code: int
    handler: RequestHandler
    measured: bool = True  # False: the handler reports its own latency (a pull, with its hold)


class Dispatcher:
    def __init__(
        self,
        routes: Iterable[Route],
        *,
        clock: Any = None,
        on_answer: Callable[[int, int, float], None] | None = None,
        on_reject: Callable[..., None] | None = None,
        access: Any = None,
    ) -> None:
        routes = list(routes)
        self.access = access
        self.handlers: dict[int, RequestHandler] = {}
        for route in routes:
            if route.code in self.handlers:
                raise ValueError(f"request code {route.code} has two handlers")
            self.handlers[route.code] = route.handler
        self.unmeasured = frozenset(r.code for r in routes if not r.measured)
        self.on_reject = on_reject if on_reject is not None else _log_reject
        self.clock = clock
        self.on_answer = on_answer

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
        if self.access is not None:
            denied = self.access.check(request, connection.ip)
            if denied is not None:
                self.on_reject(denied.reason, "ACL denies {code} from {conn}: {why}", code=request.code,
                               conn=connection, why=denied.message)  # fmt: skip
                return None if request.is_oneway else request.response(ResponseCode.SYSTEM_ERROR, denied.remark)
        handler = self.handlers.get(request.code)
        if handler is None:
            self.on_reject(UNSUPPORTED_CODE, "unsupported request code {code} from {conn}",
                           code=request.code, conn=connection)  # fmt: skip
            if request.is_oneway:
                return None
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
            if request.is_oneway:
                return None
            return request.response(exc.response_code, str(exc))


def _log_reject(reason: str, fmt: str, **fields: Any) -> None:
    """Without a ``Rejections`` (tests that build a bare dispatcher): log each one."""
    log.info(fmt, reason=reason, **fields)
