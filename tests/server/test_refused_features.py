"""Features rmqproxy does not serve yet are refused where a client first asks, with the
reference's code and remark, never accepted and then ignored: 5.x timer messages at the send."""

from __future__ import annotations

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R
from codec.message import BatchItem, encode_batch

from .harness import Client, make_server
from .test_broker import send_header


@pytest.fixture
def server(tmp_path):
    srv, _reactor = make_server(tmp_path)
    yield srv
    srv.stop()


@pytest.mark.parametrize("prop", ["TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"])
def test_a_timer_message_is_refused_not_delivered_at_once(server, prop: str) -> None:
    client = Client(server)
    answer = client.call(C.SEND_MESSAGE_V2, send_header("Timed", 0, f"{prop}\x0110000"), b"later")
    assert answer.code == R.SYSTEM_ERROR
    assert answer.remark.startswith("accurate timer message is not enabled, timerWheelEnable is false")
    assert server.store.max_offset("Timed", 0) == 0
    batch = encode_batch([BatchItem(b"a", {prop: "5"}), BatchItem(b"b")])
    answer = client.call(C.SEND_BATCH_MESSAGE, send_header("Timed", 0, "", batch=True), batch)
    assert answer.code == R.SYSTEM_ERROR and server.store.max_offset("Timed", 0) == 0


def test_a_delay_level_wins_over_timer_properties_as_in_the_reference(server) -> None:
    client = Client(server)
    answer = client.call(C.SEND_MESSAGE_V2, send_header("Timed", 0, "DELAY\x012\x02TIMER_DELAY_SEC\x01600"), b"x")
    assert answer.code == R.SUCCESS
    parked = server.store.message_at("SCHEDULE_TOPIC_XXXX", 1, 0)
    assert parked.properties["REAL_TOPIC"] == "Timed" and "TIMER_DELAY_SEC" not in parked.properties
