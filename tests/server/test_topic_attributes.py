"""5.x topic attributes: the ones whose value rmqproxy keeps are taken; compaction, batch consume
queues, per-topic retention and unknown keys are refused, not stored and ignored."""

from __future__ import annotations

import pytest

from codec.codes import RequestCode as C
from codec.codes import ResponseCode as R

from .harness import Client


@pytest.mark.parametrize(("attributes", "taken"), [
    (None, True), ("", True), ("+message.type=FIFO", True), ("+cleanup.policy=DELETE,+queue.type=SimpleCQ", True),
    ("-reserve.time", True),
    ("+cleanup.policy=COMPACTION", False), ("+queue.type=BatchCQ", False), ("+reserve.time=3600", False),
    ("+unknown.key=1", False), ("cleanup.policy=DELETE", False), ("+message.type=FIFO,+cleanup.policy=COMPACTION", False),
])  # fmt: skip
def test_topic_attributes_are_taken_only_when_kept(servers, tmp_path, attributes: str | None, taken: bool) -> None:
    server, _ = servers(tmp_path)
    answer = Client(server).call(
        C.UPDATE_AND_CREATE_TOPIC, topic="Attr", default_topic="TBW102", read_queue_nums=4, write_queue_nums=4,
        perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False, attributes=attributes,
    )  # fmt: skip
    assert (answer.code == R.SUCCESS) is taken, answer.remark
    assert (server.topics.get("Attr") is not None) is taken
    if not taken:
        assert "is not supported by rmqproxy" in answer.remark
