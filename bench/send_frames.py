"""SEND_MESSAGE_V2 frames as the Java 4.9 client writes them, for the in-process benchmarks
(``sendpath.py``, ``relay.py``): JSON header, KEYS, TAGS, WAIT and UNIQ_KEY properties, a 1 KiB
body, over ``QUEUES`` queues of an auto-created topic. Imports only the codec, so a benchmark can
measure another checkout's code with it."""

from __future__ import annotations

import os

from codec.codes import RequestCode
from codec.command import RemotingCommand
from codec.headers import REQUEST_HEADERS
from codec.message import properties_to_string

QUEUES = 4


def frames(count: int) -> list[bytes]:
    """``count`` send frames, each with its own keys, unique key and born time."""
    codec = REQUEST_HEADERS[RequestCode.SEND_MESSAGE_V2]
    body = os.urandom(1024)
    out = []
    for i in range(count):
        props = properties_to_string({"KEYS": f"k{i}", "TAGS": "TagA", "WAIT": "true",
                                      "UNIQ_KEY": f"7F00000100002A9F0000{i:012X}"})  # fmt: skip
        header = codec.cls(producer_group="bench-pg", topic="SendPath", default_topic="TBW102", default_topic_queue_nums=QUEUES,
                           queue_id=i % QUEUES, sys_flag=0, born_timestamp=1_700_000_000_000 + i, flag=0,
                           properties=props, reconsume_times=0, unit_mode=False, batch=False)  # fmt: skip
        command = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=i + 1, ext_fields=codec.encode(header),
                                  body=body, version=395)  # fmt: skip
        out.append(command.encode())
    return out
