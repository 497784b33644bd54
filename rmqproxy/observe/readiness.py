"""Whether a server should be sent traffic: ``GET /ready`` beside ``/metrics``, for load balancers
and rolling restarts (docs/operations.md, "Rolling restarts").

A server is ``starting`` until its root says it is ready (``serve``: once it listens; ``proxy``:
once the upstream cluster is read and its ports listen), then ``ready``, and ``draining`` from
the moment it is asked to stop: the endpoint answers 200 only when ready, 503 with the state and
its reason otherwise, so a balancer stops sending new clients before the ports close.
"""

from __future__ import annotations

from typing import Any

from twisted.web.resource import Resource

__all__ = ["DRAINING", "READY", "STARTING", "Probes", "Readiness", "ReadyResource"]

STARTING = "starting"
READY = "ready"
DRAINING = "draining"


class Readiness:
    """One server's state (see the module doc) and why it is in it."""

    def __init__(self) -> None:
        self.state = STARTING
        self.reason = "starting up"

    @property
    def ready(self) -> bool:
        return self.state == READY

    def set_ready(self) -> None:
        """The server may be sent traffic (never again once draining)."""
        if self.state == STARTING:
            self.state, self.reason = READY, "serving"

    def waiting(self, reason: str) -> None:
        """Still starting, for ``reason`` (what the endpoint says meanwhile)."""
        if self.state == STARTING:
            self.reason = reason

    def drain(self, reason: str = "stopping: answering what is in flight, accepting no new connections") -> None:
        """The server is stopping: no new traffic."""
        self.state, self.reason = DRAINING, reason


class ReadyResource(Resource):
    """``GET /ready``: 200 "ready" or 503 "<state>: <reason>", as plain text."""

    isLeaf = True

    def __init__(self, readiness: Readiness) -> None:
        super().__init__()
        self.readiness = readiness

    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"Content-Type", b"text/plain; charset=utf-8")
        readiness = self.readiness
        if readiness.ready:
            return b"ready\n"
        request.setResponseCode(503)
        return f"{readiness.state}: {readiness.reason}\n".encode()


class Probes(Resource):
    """The metrics port's paths: ``/ready`` (``ReadyResource``), and ``/metrics`` for every other
    path, as before there was a second."""

    isLeaf = True

    def __init__(self, metrics: Resource, ready: ReadyResource) -> None:
        super().__init__()
        self.metrics = metrics
        self.ready = ready

    def render(self, request: Any) -> Any:
        if request.path.rstrip(b"/") == b"/ready":
            return self.ready.render(request)
        return self.metrics.render(request)
