"""Hold service against a running ``rmqproxy serve``, driven by a Python load client on the codec;
prints a JSON report (numbers and machine), asserts nothing.

(a) wake latency: a pull held on an empty queue, then a sync send to that queue; latency is the
    held pull's answer arriving minus the send's acknowledgement arriving (negative: the answer
    won), p50/p99/max over N wakes;
(b) timeout overshoot: 1,000 pulls held with a 1 s suspend timeout, arriving about one a
    millisecond; answer time minus (request time + 1 s), p50/p99/max, client and server side
    (deadlines bunched closer than one answer's cost, ~0.1 ms, queue up behind each other);
(c) 10,000 pulls held at once over 100 connections: server RSS and CPU while idle-holding, then
    the time to wake them all by sending one message to each queue;
(d) with ``--under-load``: (b) again while the real Java client sends 1 KiB messages from 16
    threads (``bench/java/E2eBench.java``), paced to 5,000 msgs/s, then as fast as the server
    takes them; with the send rate each time;
(e) with ``--scraped``: (b) again on a server whose /metrics carries the pull series of
    ``--scrape-groups`` groups on 8 topics, while a scraper fetches /metrics back to back; with the
    scrape's size and duration (a scrape rendered in one call held every deadline that fell in it);
with ``--seeded-log compacting``: all of it while the server's background compaction works on
closed log files it found at start (``closed_logs``), with how many were left at the end;
``--seeded-log idle`` seeds the same files and leaves them, the run to compare with.
Targets (issue 7): wake p99 <= 1 ms, overshoot p99 <= 10 ms, 10,000 held with RSS <= 300 MB
and idle CPU <= 5% of a core; (issue 26) server-side overshoot p99 <= 1 ms at 5,000 msgs/s and
<= 5 ms under saturation. Run: ``python bench/hold.py [--wakes N] [--held N] [--under-load] [--scraped] [--seeded-log compacting|idle]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import closed_logs  # noqa: E402
from machine import machine  # noqa: E402

from codec.codes import RequestCode as C  # noqa: E402
from codec.command import RemotingCommand  # noqa: E402
from codec.peer import ANSWER, RemotingPeer  # noqa: E402
from codec.headers import (  # noqa: E402
    SEND_V2,
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from rmqproxy.observe.log_files import instance_name  # noqa: E402
from tests.interop.oracle import build_classpath  # noqa: E402
from tests.interop.server import RunningServer, free_port  # noqa: E402

E2E_PROGRAM = Path(__file__).resolve().parent / "java" / "E2eBench.java"

SUSPEND_SUBSCRIPTION = 0x2 | 0x4  # may be held; the subscription travels with the request


class Client:
    """One connection: requests out, responses matched by opaque (asyncio, sans blocking)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.peer = RemotingPeer()
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, address: str) -> Client:
        host, port = address.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    async def _read(self) -> None:
        while data := await self.reader.read(1 << 16):
            now = time.perf_counter()
            for incoming in self.peer.receive(data):
                future = incoming.outstanding.context if incoming.kind is ANSWER else None
                if future is not None and not future.done():
                    future.set_result((now, incoming.command))

    def request(self, code: int, ext: dict, body: bytes = b"") -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        _, data = self.peer.request(RemotingCommand(code=code, ext_fields=ext, body=body), context=future)
        self.writer.write(data)
        return future

    def pull(self, topic: str, queue_id: int, offset: int, suspend_ms: int, group: str = "bench") -> asyncio.Future:
        header = PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
            sys_flag=SUSPEND_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=suspend_ms, subscription="*",
            sub_version=0, expression_type="TAG",
        )  # fmt: skip
        return self.request(C.PULL_MESSAGE, header.to_ext())

    def send(self, topic: str, queue_id: int) -> asyncio.Future:
        header = SendMessageRequestHeader(
            producer_group="bench-pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties="TAGS\x01b",
        )  # fmt: skip
        return self.request(C.SEND_MESSAGE_V2, SEND_V2.encode(header), b"x" * 100)

    async def close(self) -> None:
        self.writer.close()
        self.task.cancel()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


def proc(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    rss_pages = int(fields[21])
    return (int(fields[11]) + int(fields[12])) / 100, rss_pages * 4096


async def create_topic(client: Client, topic: str, queues: int) -> None:
    header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                      write_queue_nums=queues, perm=6, topic_filter_type="SINGLE_TAG", order=False)
    _, response = await client.request(C.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    assert response.code == 0, response


async def wake_latency(address: str, wakes: int) -> dict:
    puller, sender = await Client.connect(address), await Client.connect(address)
    await create_topic(sender, "HoldWake", 1)
    latencies = []
    for offset in range(wakes):
        held = puller.pull("HoldWake", 0, offset, 15000)
        await asyncio.sleep(0)  # let the pull reach the server and be held first
        await asyncio.sleep(0.0005)
        (acked, send_response), (answered, pull_response) = await asyncio.gather(sender.send("HoldWake", 0), held)
        assert send_response.code == 0 and pull_response.code == 0, (send_response, pull_response)
        latencies.append((answered - acked) * 1000)
    await puller.close()
    await sender.close()
    return {"wakes": wakes, "latency_ms_p50": pct(latencies, 0.5), "latency_ms_p99": pct(latencies, 0.99),
            "latency_ms_max": round(max(latencies), 3)}  # fmt: skip


async def overshoot(address: str, pulls: int, log_dir: Path, topic: str = "HoldIdle") -> dict:
    """Client side: answer time minus (request written + 1 s), which includes the server's queue
    of pulls still to read when they all arrive at once; server side: the event log's hold time
    minus the requested suspend time (the hold service's own precision)."""
    clients = [await Client.connect(address) for _ in range(10)]
    await create_topic(clients[0], topic, 8)
    futures, written = [], []
    for i in range(pulls):
        futures.append(clients[i % 10].pull(topic, i % 8, 0, 1000, group=f"g{i}"))
        written.append(time.perf_counter())
        await asyncio.sleep(0.001)  # ~1 pull/ms, as pulls of many consumers arrive, not in bursts
    results = await asyncio.gather(*futures)
    late = [(answered - sent - 1.0) * 1000 for (answered, _), sent in zip(results, written, strict=True)]
    assert all(response.code == 19 for _, response in results)
    for client in clients:
        await client.close()
    await asyncio.sleep(1.0)  # the event log is flushed every 0.5 s
    own = f"pulls-*-{instance_name(address)}-*.jsonl"  # this server's files (not those seeded to compact)
    events = [json.loads(line) for path in sorted(log_dir.glob(own)) for line in path.read_text().splitlines()]
    server_late = [e["hold_ms"] - e["suspend_ms"] for e in events if e["topic"] == topic and e["wake"] == "timeout"]
    return {
        "pulls": pulls, "timeout_s": 1.0, "arrival_spread_s": round(written[-1] - written[0], 2),
        "client_overshoot_ms_p50": pct(late, 0.5), "client_overshoot_ms_p99": pct(late, 0.99),
        "client_overshoot_ms_max": round(max(late), 3),
        "server_overshoot_ms_p50": pct(server_late, 0.5), "server_overshoot_ms_p99": pct(server_late, 0.99),
        "server_overshoot_ms_max": round(max(server_late), 3),
    }  # fmt: skip


async def overshoot_under_load(address: str, pulls: int, log_dir: Path, rate: int = 0, threads: int = 16) -> dict:
    """(b) while a 16-thread Java sender saturates the server, or sends ``rate`` msgs/s in all."""
    load_s = 20
    sender = subprocess.Popen(
        ["java", "-cp", build_classpath("4.9"), str(E2E_PROGRAM), "send", address, "HoldLoad", "1", str(threads),
         str(load_s), str(rate)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    await asyncio.sleep(5)  # the client starts and reaches full load
    result = await overshoot(address, pulls, log_dir, topic=f"HoldLoaded{rate}")
    out, _ = await asyncio.to_thread(sender.communicate)
    lines = [x for x in out.splitlines() if x.startswith("RESULT ")]
    warm = json.loads(lines[0][len("RESULT "):])["warmup_msgs"] if lines else 0
    return {**result, "sender_threads": threads, "sender_rate_limit": rate or None,
            "sender_msgs_per_s": round(warm / load_s)}  # fmt: skip


async def many_held(address: str, pid: int, held: int, connections: int, queues: int) -> dict:
    clients = [await Client.connect(address) for _ in range(connections)]
    await create_topic(clients[0], "HoldMany", queues)
    # One message per queue first: queues in use have their files already (a queue's very first
    # message also pays for creating its consume-queue file).
    await asyncio.gather(*(clients[0].send("HoldMany", q) for q in range(queues)))
    futures = [clients[i % connections].pull("HoldMany", i % queues, 1, 60000, group=f"g{i // queues}")
               for i in range(held)]  # fmt: skip
    await asyncio.sleep(3)  # all held by now
    cpu0, _ = proc(pid)
    idle_s = 5.0
    await asyncio.sleep(idle_s)
    cpu1, rss = proc(pid)
    started = time.perf_counter()
    sender = await Client.connect(address)
    await asyncio.gather(*(sender.send("HoldMany", q) for q in range(queues)))
    results = await asyncio.gather(*futures)
    woke_all_s = time.perf_counter() - started
    assert all(response.code == 0 for _, response in results)
    for client in [*clients, sender]:
        await client.close()
    return {"held": held, "connections": connections, "queues": queues, "server_rss_mb": round(rss / 1e6, 1),
            "idle_cpu_share_of_a_core": round((cpu1 - cpu0) / idle_s, 4), "wake_all_s": round(woke_all_s, 3)}  # fmt: skip


async def scrape(port: int) -> tuple[int, float]:
    """One GET /metrics: bytes and seconds."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")
    body = await reader.read()
    writer.close()
    return len(body), time.perf_counter() - started


async def overshoot_while_scraped(groups: int, pulls: int) -> dict:
    """(e): the pull series of ``groups`` groups on 8 topics, then (b) while /metrics is scraped."""
    port = free_port()
    with RunningServer(message_delay_level=None, broker_conf={"metricsPromExporterPort": str(port)}) as server:
        client = await Client.connect(server.namesrv)
        for t in range(8):
            await create_topic(client, f"Scraped{t}", 1)
        await asyncio.gather(*(client.pull(f"Scraped{g % 8}", 0, 0, 0, group=f"s{g}") for g in range(groups)))
        await client.close()
        sizes, times, done = [], [], asyncio.Event()

        async def scraper() -> None:
            while not done.is_set():
                size, seconds = await scrape(port)
                sizes.append(size)
                times.append(seconds * 1000)

        task = asyncio.get_running_loop().create_task(scraper())
        result = await overshoot(server.namesrv, pulls, server.store_dir / "logs", topic="HoldScraped")
        done.set()
        await task
    return {**result, "series_groups": groups, "scrapes": len(times), "scrape_bytes": max(sizes),
            "scrape_ms_p50": pct(times, 0.5), "scrape_ms_max": round(max(times), 1)}  # fmt: skip


async def run(args: argparse.Namespace) -> dict:
    if args.scraped_only:
        return {"timeout_overshoot_while_scraped": await overshoot_while_scraped(args.scrape_groups, args.timeouts)}
    with tempfile.TemporaryDirectory(prefix="rmqproxy-hold-") as name:
        workdir = Path(name)
        conf, seeded = closed_logs.prepare(workdir, args.seeded_log == "compacting") if args.seeded_log else (None, None)
        with RunningServer(message_delay_level=None, workdir=workdir, broker_conf=conf) as server:
            result = await measure_server(server, args)
        if seeded is not None:
            result["seeded_log"] = {"compaction": args.seeded_log, "seeded": seeded,
                                    "files_left_at_end": closed_logs.left(closed_logs.log_folder(workdir))}  # fmt: skip
        return result


async def measure_server(server: RunningServer, args: argparse.Namespace) -> dict:
    """Every measure of ``run`` but the scraped one, on ``server``."""
    pid = server._proc.pid  # the serve process
    return {
        "wake_latency": await wake_latency(server.namesrv, args.wakes),
        "timeout_overshoot": await overshoot(server.namesrv, args.timeouts, server.store_dir / "logs"),
        "many_held": await many_held(server.namesrv, pid, args.held, args.connections, args.queues),
        **({"timeout_overshoot_at_5000_msgs_per_s": await overshoot_under_load(
            server.namesrv, args.timeouts, server.store_dir / "logs", rate=5000),
            "timeout_overshoot_under_load": await overshoot_under_load(
            server.namesrv, args.timeouts, server.store_dir / "logs")} if args.under_load else {}),
        **({"timeout_overshoot_while_scraped": await overshoot_while_scraped(args.scrape_groups, args.timeouts)}
           if args.scraped else {}),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wakes", type=int, default=10_000)
    parser.add_argument("--timeouts", type=int, default=1000)
    parser.add_argument("--held", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--seeded-log", choices=("compacting", "idle"),
                        help="start with closed log files (closed_logs), compacting them in the background or not")
    parser.add_argument("--under-load", action="store_true", help="also measure overshoot while a Java sender saturates")
    parser.add_argument("--scraped", action="store_true", help="also measure overshoot while /metrics is scraped")
    parser.add_argument("--scraped-only", action="store_true", help="measure only that")
    parser.add_argument("--scrape-groups", type=int, default=500, help="consumer groups with pull series")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    report = {
        "benchmark": "hold", "machine": machine(), "results": results,
        "targets": {"wake_latency_ms_p99": 1, "overshoot_ms_p99": 10, "rss_mb_10k_held": 300, "idle_cpu_share": 0.05,
                    "server_overshoot_ms_p99_at_5000_msgs_per_s": 1, "server_overshoot_ms_p99_under_load": 5},
    }  # fmt: skip
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
