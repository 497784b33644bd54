"""The reply fast path against a real loopback TCP connection of the installed Twisted (issue 25):
``rmqproxy/net/sockwrite.py`` uses private parts of ``tcp.Connection``, so this is what tells a Twisted
upgrade that changed them from one that did not (the unit tests' fakes cannot)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.implementations import child_env
from tests.server.tcp_writes import PAYLOAD

ROOT = Path(__file__).resolve().parents[2]


def test_write_now_sends_straight_to_a_real_socket_and_keeps_every_byte_in_order() -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.server.tcp_writes"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True, env=child_env())  # fmt: skip
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["can_write_directly"], "Twisted's tcp.Connection no longer has the parts sockwrite uses"
    assert result["intact"] and result["received_bytes"] == len(PAYLOAD)
    assert 0 < result["direct_bytes"] < len(PAYLOAD)  # some went straight out, the rest queued behind
