"""What ACL and TLS cost: sync sends with the real Java client against ``rmqproxy serve`` plain,
with ``aclEnable=true`` (every request signed and checked), and over TLS, in the same run;
prints a JSON report (numbers and machine), asserts nothing.

Each run starts a fresh server on a fresh store; the Java 4.9.x client warms up for ``--warmup``
seconds (default 5) at full load, then sends ``--messages`` (default 200,000) 1 KiB messages from
16 threads, with server CPU per message. ``--pairs`` (default 2) rounds run plain, ACL and TLS
each, the order turning every round; the report holds each run and the median ratios.
Targets (issue 29): ACL >= 0.85x plain, TLS >= 0.7x plain.
Run: ``python bench/security.py [--messages N] [--pairs N] [--warmup S]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import proc_stats, run_java  # noqa: E402
from machine import machine  # noqa: E402

from tests.interop.oracle import build_classpath  # noqa: E402
from tests.interop.server import RunningServer  # noqa: E402

ACCESS_KEY, SECRET_KEY = "benchAccessKey", "benchSecretKey"
ACL_YAML = f"""accounts:
  - accessKey: {ACCESS_KEY}
    secretKey: {SECRET_KEY}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
#: Each variant: broker.conf keys of the server, JVM options of the client.
VARIANTS = {
    "plain": ({"tls.server.mode": "disabled"}, ()),
    "acl": ({"tls.server.mode": "disabled", "aclEnable": "true"},
            (f"-Dbench.accessKey={ACCESS_KEY}", f"-Dbench.secretKey={SECRET_KEY}")),
    "tls": ({"tls.server.mode": "enforcing"}, ("-Dtls.enable=true",)),
}  # fmt: skip


def run(variant: str, classpath: str, args: argparse.Namespace, home: Path) -> dict:
    conf, jvm = VARIANTS[variant]
    conf = {**conf, "rocketmqHome": str(home), "mappedFileSizeCommitLog": str(1 << 30)}
    with RunningServer(broker_conf=conf, message_delay_level=None) as server:
        start: dict = {"cpu": sum(proc_stats(server.pid)[:2])}

        def warmed() -> None:
            start["cpu"] = sum(proc_stats(server.pid)[:2])

        result = run_java(classpath, "send", server.namesrv, "SecurityTopic", str(args.messages), "16", str(args.warmup),
                          on_warm=warmed, jvm=jvm)  # fmt: skip
        cpu = sum(proc_stats(server.pid)[:2]) - start["cpu"]
    return {"variant": variant, "msgs_per_s": result["msgs_per_s"], "failed": result["failed"],
            "p99_ms": result["p99_ms"], "server_cpu_us_per_msg": round(cpu / args.messages * 1e6, 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    classpath = build_classpath("4.9")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "conf").mkdir()
        (home / "conf" / "plain_acl.yml").write_text(ACL_YAML)
        order = list(VARIANTS)
        for round_no in range(args.pairs):
            for variant in order[round_no % 3:] + order[: round_no % 3]:
                runs.append({"round": round_no, **run(variant, classpath, args, home)})
                print(json.dumps(runs[-1]), file=sys.stderr)
    ratios = {}
    for variant in ("acl", "tls"):
        per_round = [next(r for r in runs if r["round"] == n and r["variant"] == variant)["msgs_per_s"]
                     / next(r for r in runs if r["round"] == n and r["variant"] == "plain")["msgs_per_s"]
                     for n in range(args.pairs)]  # fmt: skip
        ratios[variant] = {"per_round": [round(x, 3) for x in per_round], "median": round(statistics.median(per_round), 3)}
    print(json.dumps({"benchmark": "security", "machine": machine(), "messages": args.messages,
                      "warmup_s": args.warmup, "runs": runs, "ratio_to_plain": ratios,
                      "targets": {"acl": 0.85, "tls": 0.7}}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
