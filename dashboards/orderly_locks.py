"""The "Orderly & locks" dashboard: queue locks of orderly consumer groups.

An orderly consumer consumes a queue only while it holds that queue's lock on the broker
(LOCK_BATCH_MQ, renewed every 20 s by the Java client). When a queue changes owner the new owner
waits for the lock: rmqproxy measures release → grant as the handoff time, and frees locks of
clients that unregister or disconnect (docs/protocol.md, Locks). Client-side consume RT and TPS of the
same groups come from GET_CONSUMER_RUNNING_INFO.
"""

from __future__ import annotations

from . import alerts
from . import names as N
from .panels import dashboard, target, timeseries, variables
from .promql import avg_by, increase, quantile, rate, sel, sum_by

INSTANCE = 'instance=~"$instance"'
GROUP = (INSTANCE, 'consumer_group=~"$consumer_group"')
CLIENT = (INSTANCE, 'group=~"$consumer_group"')


def build():
    requests = timeseries(
        "Lock requests by outcome",
        [
            target(
                sum_by(["consumer_group", "op", "outcome"], rate(sel(N.LOCK_REQUESTS.total, *GROUP))),
                "{{consumer_group}} {{op}} {{outcome}}",
            )
        ],
        unit="reqps",
        stack=True,
        description=(
            "LOCK_BATCH_MQ (op=lock: granted, partial, refused) and UNLOCK_BATCH_MQ (op=unlock: released, none) "
            "per second. Refusals mean another client of the group still holds the queue."
        ),
    )
    locked = timeseries(
        "Locked queues",
        [target(sum_by(["consumer_group"], sel(N.LOCKED_QUEUES.gauge, *GROUP)), "{{consumer_group}}")],
        description="Queues locked and not expired now (rmqproxy_locked_queues), retry queues included.",
    )
    handoffs = timeseries(
        f"Lock handoffs (in {alerts.LOCK_CHURN_WINDOW})",
        [
            target(
                sum_by(["consumer_group"], increase(sel(N.LOCK_HANDOFF.count, *GROUP), alerts.LOCK_CHURN_WINDOW)),
                "{{consumer_group}}",
            )
        ],
        description=(
            f"Queues that changed owner in the last {alerts.LOCK_CHURN_WINDOW}. RmqproxyLockChurn fires above "
            f"{alerts.LOCK_HANDOFFS_PER_QUEUE} per locked queue."
        ),
    )
    handoff_time = timeseries(
        "Lock handoff time p50 / p99",
        [
            target(quantile(0.5, sel(N.LOCK_HANDOFF.bucket, *GROUP), ["consumer_group"]), "p50 {{consumer_group}}"),
            target(quantile(0.99, sel(N.LOCK_HANDOFF.bucket, *GROUP), ["consumer_group"]), "p99 {{consumer_group}}"),
        ],
        unit="s",
        description=(
            "From a queue's release by one client to its grant to the next (rmqproxy_lock_handoff_seconds): the "
            "time that queue was consumed by nobody. A dead client's locks are freed 31 s after its last "
            "renewal in lockReleaseOnDisconnect=safe mode."
        ),
    )
    consume_rt = timeseries(
        "Consume RT (client-reported)",
        [target(avg_by(["group", "topic"], sel(N.CLIENT_CONSUME_RT_MS.gauge, *CLIENT)), "{{group}} {{topic}}")],
        unit="ms",
        description="Mean time the listener took per message, as the consumers report it (rocketmq_client_consume_rt).",
    )
    consume_tps = timeseries(
        "Consumed OK / failed per second (client-reported)",
        [
            target(sum_by(["group"], sel(N.CLIENT_CONSUME_OK_TPS.gauge, *CLIENT)), "ok {{group}}"),
            target(sum_by(["group"], sel(N.CLIENT_CONSUME_FAIL_TPS.gauge, *CLIENT)), "failed {{group}}"),
        ],
        unit="reqps",
        description=(
            "An orderly listener returning SUSPEND_CURRENT_QUEUE_A_MOMENT counts as failed and stalls its queue."
        ),
    )
    out_and_lag = timeseries(
        "Messages out and lag",
        [
            target(sum_by(["consumer_group"], rate(sel(N.MESSAGES_OUT.total, *GROUP))), "out/s {{consumer_group}}"),
            target(sum_by(["consumer_group"], sel(N.CONSUMER_LAG.gauge, *GROUP)), "lag {{consumer_group}}"),
        ],
        description="Messages pulled per second and messages not yet committed, per group (broker view).",
    )
    return dashboard(
        uid="rmqproxy-orderly-locks",
        title="rmqproxy / Orderly & locks",
        description="Queue locks of orderly consumers: requests, locked queues, handoffs and their cost.",
        tags=["orderly", "locks"],
        templating=variables(instance=N.RPC_LATENCY_MS.count, consumer_group=N.LOCK_REQUESTS.total),
        rows=[
            ("Locks", [requests, locked, handoffs]),
            ("Handoffs and consumption", [handoff_time, consume_rt, consume_tps]),
            ("Broker view", [out_and_lag]),
        ],
    )
