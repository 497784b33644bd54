"""Codec throughput on one core; prints a JSON report (numbers and machine), asserts nothing.

Targets (issue 4): >= 100,000 small frames/s each way for JSON and ROCKETMQ headers (measured on
a PULL_NOT_FOUND answer, and for reference on a full 13-field PULL_MESSAGE request), and
>= 200,000 messages/s decoding a 32-message pull body of 1 KiB messages.
``--implementation`` picks the codec (``codec.implementation``); ``both`` measures pure and compiled
alternately (``--runs`` rounds, A B A B) and reports each round and the best of each.
Run: ``python bench/codec.py [--seconds N] [--implementation pure|compiled|both] [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codec import frame as framing  # noqa: E402  (its hot names: codec.implementation rebinds them)
from codec import implementation  # noqa: E402
from codec import message as codec_message  # noqa: E402
from codec.codes import RequestCode, ResponseCode, SerializeType  # noqa: E402
from codec.command import RemotingCommand  # noqa: E402
from codec.headers import PullMessageRequestHeader, PullMessageResponseHeader  # noqa: E402
from codec.message import HostPort, Message, decode_messages  # noqa: E402
from machine import commit, machine  # noqa: E402


def rate(fn: Callable[[], object], units_per_call: int, seconds: float) -> float:
    """Calls per second times units, best of three timed rounds of about ``seconds / 3`` each."""
    n = 1
    while True:  # calibrate
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed > 0.05:
            break
        n *= 2
    per_round = max(1, int(n * (seconds / 3) / elapsed))
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(per_round):
            fn()
        best = max(best, per_round * units_per_call / (time.perf_counter() - start))
    return best


def pull_request(serialize_type: int) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="please_rename_unique_group_name", topic="TopicTest", queue_id=3, queue_offset=123456,
        max_msg_nums=32, sys_flag=3, commit_offset=123400, suspend_timeout_millis=15000, subscription="TagA || TagB",
        sub_version=1700000000000, expression_type="TAG", bname="rmqproxy-a",
    )  # fmt: skip
    return RemotingCommand(
        code=RequestCode.PULL_MESSAGE, opaque=4242, ext_fields=header.to_ext(), serialize_type=serialize_type
    )


def pull_not_found(serialize_type: int) -> RemotingCommand:
    """The commonest small frame a broker writes: a PULL_NOT_FOUND answer (golden frame B of ``tests/codec/golden.py``)."""
    header = PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=5, min_offset=0, max_offset=5)
    return RemotingCommand(
        code=ResponseCode.PULL_NOT_FOUND, opaque=7, flag=1, remark="OFFSET_OVERFLOW_ONE",
        ext_fields=header.to_ext(), serialize_type=serialize_type,
    )  # fmt: skip


def measure(seconds: float) -> dict:
    """Every throughput figure, on the codec implementation now bound."""
    results: dict = {}
    for kind, build in (("small", pull_not_found), ("pull_request", pull_request)):
        for name, stype in (("json", SerializeType.JSON), ("rocketmq", SerializeType.ROCKETMQ)):
            cmd = build(stype)
            frame = cmd.encode()
            decoder = framing.FrameDecoder()
            prefix = f"{kind}_{name}"
            results[f"{prefix}_frame_bytes"] = len(frame)
            results[f"{prefix}_decode_frames_per_s"] = round(
                rate(lambda d=decoder, f=frame: [RemotingCommand.decode(p) for p in d.feed(f)], 1, seconds)
            )
            results[f"{prefix}_encode_frames_per_s"] = round(rate(cmd.encode, 1, seconds))
    frame = pull_request(SerializeType.JSON).encode()
    results["pull_request_json_decode_with_typed_header_per_s"] = round(
        rate(lambda: PullMessageRequestHeader.from_ext(RemotingCommand.decode(frame[4:]).ext_fields), 1, seconds)
    )

    props = {
        "TAGS": "TagA", "KEYS": "order-1", "UNIQ_KEY": "7F00000130391B6D35860A1B2C3D0001", "CLUSTER": "DefaultCluster"
    }  # fmt: skip
    messages = [
        Message("TopicTest", os.urandom(1024), dict(props), queue_id=3, queue_offset=i, physical_offset=i * 1200,
                born_timestamp=1700000000000 + i, born_host=HostPort("10.0.0.7", 50123),
                store_timestamp=1700000000005 + i, store_host=HostPort("10.0.0.1", 10911))
        for i in range(32)
    ]  # fmt: skip
    encode = codec_message.encode_message
    body = b"".join(encode(m) for m in messages)
    results["pull_body_bytes"] = len(body)
    results["message_encode_per_s"] = round(rate(lambda: [encode(m) for m in messages], 32, seconds))
    results["pull_body_decode_messages_per_s"] = round(rate(lambda: decode_messages(body), 32, seconds))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="time budget per measurement")
    parser.add_argument("--implementation", choices=["pure", "compiled", "both"], default=implementation.DEFAULT)
    parser.add_argument("--runs", type=int, default=1, help="rounds of each implementation")
    args = parser.parse_args(argv)

    kinds = ["pure", "compiled"] if args.implementation == "both" else [args.implementation]
    rounds: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind in kinds:
            implementation.use(kind)
            rounds[kind].append(measure(args.seconds))
    report: dict = {"benchmark": "codec", "commit": commit(), "machine": machine(), "results": {}}
    for kind, measured in rounds.items():
        best = {key: max(m[key] for m in measured) for key in measured[0]}
        report["results"][kind] = {**best, "rounds": measured}
    if len(kinds) == 2:
        report["results"]["compiled_over_pure"] = {
            key: round(report["results"]["compiled"][key] / value, 2)
            for key, value in report["results"]["pure"].items() if key.endswith("_per_s")
        }  # fmt: skip
    report["targets"] = {
        "frames_per_s_each_way": 100000,
        "pull_body_decode_messages_per_s": 200000,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
