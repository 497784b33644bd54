"""Tests whose runs against the reference go side by side: the reference's gRPC scenarios are mostly
waiting (its 10 s minimum invisibility, its revive scan, its 5 s long-poll floor), so one after the
other they cost minutes of an idle machine.

``Concurrent()`` collects test bodies ``body(target, client)`` with ``concurrent.test(seconds)``
(how long the body takes on the reference, to start the longest first). Its fixture, at module set
up for a reference target, runs every collected body in a small pool; each test then reports the
outcome of its own body (its assertion error with its traceback). Against rmqproxy each test runs
its body itself, one at a time, as usual: there the timing checks are tight and the runs short.
What a body prints on the reference lands in whichever test's output is being captured then.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator
from typing import Any

import pytest

__all__ = ["Concurrent"]

Body = Callable[[Any, Any], None]


class Concurrent:
    """The bodies of one module's side-by-side tests, and the fixture that runs them."""

    def __init__(self, workers: int = 4) -> None:
        self.workers = workers
        self.bodies: dict[str, tuple[float, Body]] = {}

    def test(self, seconds: float) -> Callable[[Body], Callable[..., None]]:
        """Decorator: ``body(target, client)`` becomes a test that takes the fixture ``reference_runs``."""

        def decorate(body: Body) -> Callable[..., None]:
            self.bodies[body.__name__] = (seconds, body)

            def test(target: Any, client: Any, reference_runs: dict[str, concurrent.futures.Future] | None) -> None:
                if reference_runs is None:
                    body(target, client)
                else:
                    reference_runs[body.__name__].result()

            test.__name__, test.__qualname__, test.__doc__ = body.__name__, body.__qualname__, body.__doc__
            test.__module__ = body.__module__
            return test

        return decorate

    def fixture(self) -> Any:
        """The module-scoped ``reference_runs`` fixture: None for rmqproxy, else every body's future."""

        @pytest.fixture(scope="module")
        def reference_runs(target: Any, client: Any) -> Iterator[dict[str, concurrent.futures.Future] | None]:
            if not target.reference:
                yield None
                return
            with concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="reference-run") as pool:
                longest_first = sorted(self.bodies.items(), key=lambda kv: -kv[1][0])
                yield {name: pool.submit(body, target, client) for name, (_s, body) in longest_first}

        return reference_runs
