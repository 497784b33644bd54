"""The "Pull path" dashboard: where a pull's time goes.

A client's pull RT (what the Java client measures, reported in GET_CONSUMER_RUNNING_INFO) sits
next to the server's pull latency, which rmqproxy splits into hold time (waiting for a message or
the deadline) and service time (reading and answering). Long holds are normal with quiet
producers; service time is the broker's own cost and the number to alert on
(``alerts.SERVICE_P99_ALERT_S``).
"""

from __future__ import annotations

from . import alerts
from . import names as N
from .panels import dashboard, heatmap, stat, steps, target, timeseries, variables
from .promql import avg_by, increase, mean, quantile, rate, sel, sum_by

INSTANCE = 'instance=~"$instance"'
PULLS = (INSTANCE, 'topic=~"$topic"', 'consumer_group=~"$consumer_group"')
CLIENT = (INSTANCE, 'topic=~"$topic"', 'group=~"$consumer_group"')


def build():
    latency = sel(N.PULL_LATENCY.bucket, *PULLS)
    hold = sel(N.PULL_HOLD.bucket, *PULLS)
    service = sel(N.PULL_SERVICE.bucket, *PULLS)
    overshoot = sel(N.HOLD_OVERSHOOT.bucket, INSTANCE)

    client_rt_s = f"{avg_by(['group', 'topic'], sel(N.CLIENT_PULL_RT_MS.gauge, *CLIENT))} / 1000"
    server_mean_s = mean(
        sel(N.PULL_LATENCY.sum, *PULLS), sel(N.PULL_LATENCY.count, *PULLS), ["consumer_group", "topic"]
    )
    client_vs_server = timeseries(
        "Client pull RT vs server pull latency",
        [
            target(client_rt_s, "client {{group}} {{topic}}"),
            target(server_mean_s, "server {{consumer_group}} {{topic}}"),
        ],
        unit="s",
        description=(
            "Client: mean pull RT the Java consumers report (their last-minute average, polled every "
            "clientStatsIntervalSeconds), averaged over the group's clients. Server: mean time from a pull's "
            "arrival to its answer. The gap is network and client-side queueing; the server's part is split "
            "below into hold and service time."
        ),
    )
    latency_quantiles = timeseries(
        "Server pull latency p50 / p99, held vs not held",
        [
            target(quantile(0.5, latency, ["held"]), "p50 held={{held}}"),
            target(quantile(0.99, latency, ["held"]), "p99 held={{held}}"),
        ],
        unit="s",
        log_scale=True,
        description=(
            "Pull arrival to answer (rmqproxy_pull_latency_seconds). held=true pulls found nothing and waited "
            "for a message or their suspend timeout; held=false pulls were answered from the store at once."
        ),
    )
    service_p99 = timeseries(
        "Service time p99 (alert on this)",
        [
            target(quantile(0.99, service), "p99"),
            target(quantile(0.99, service, ["topic"]), "p99 {{topic}}"),
        ],
        unit="s",
        thresholds=steps(("green", None), ("red", alerts.SERVICE_P99_ALERT_S)),
        description=(
            "Time spent reading the store and answering, outside any hold (rmqproxy_pull_service_seconds). "
            "The line is RmqproxyPullServiceTimeHigh's threshold."
        ),
    )
    hold_heatmap = heatmap(
        "Hold time",
        sum_by(["le"], increase(hold)),
        description="How long held pulls waited, per bucket of rmqproxy_pull_hold_seconds (all wake reasons).",
    )
    hold_quantiles = timeseries(
        "Hold time p50 / p99 by wake reason",
        [
            target(quantile(0.5, hold, ["wake"]), "p50 {{wake}}"),
            target(quantile(0.99, hold, ["wake"]), "p99 {{wake}}"),
        ],
        unit="s",
        description=(
            "arrival: a message came; timeout: the client's suspend time ran out (15 s for push consumers); "
            "disconnect and shutdown end holds early."
        ),
    )
    wakes = timeseries(
        "Wake reasons",
        [target(sum_by(["wake"], rate(sel(N.HOLD_WAKEUPS.total, *PULLS))), "{{wake}}")],
        unit="reqps",
        stack=True,
        description="Held pulls ended per second, by what ended them (rmqproxy_hold_wakeups_total).",
    )
    held_share = (
        f"{sum_by([], sel(N.HELD_PULLS.gauge, INSTANCE))}\n/ {sum_by([], sel(N.HELD_PULLS_LIMIT.gauge, INSTANCE))}"
    )
    held_total = stat(
        "Held pulls of maxHeldPulls",
        [target(held_share, "held")],
        unit="percentunit",
        thresholds=steps(("green", None), ("orange", 0.8), ("red", alerts.HELD_PULLS_ALERT_RATIO)),
        description=(
            "Pulls held now, all groups, as a share of maxHeldPulls (rmqproxy_held_pulls_limit). Past the cap "
            "pulls are answered at once instead of held."
        ),
    )
    held_by_group = timeseries(
        "Held pulls by group and topic",
        [target(sum_by(["consumer_group", "topic"], sel(N.HELD_PULLS.gauge, *PULLS)), "{{consumer_group}} {{topic}}")],
        stack=True,
        description="rmqproxy_held_pulls, read from the hold table at scrape time.",
    )
    overshoot_quantiles = timeseries(
        "Timeout overshoot p50 / p99",
        [
            target(quantile(0.5, overshoot), "p50"),
            target(quantile(0.99, overshoot), "p99"),
        ],
        unit="s",
        description=(
            "Timeout wakes only: how long after its requested suspend time a held pull was answered "
            "(rmqproxy_pull_hold_overshoot_seconds). RocketMQ's own broker sweeps every 5 s."
        ),
    )
    pull_codes = timeseries(
        "Pulls by response code",
        [target(sum_by(["code", "held"], rate(sel(N.PULL_LATENCY.count, *PULLS))), "{{code}} held={{held}}")],
        unit="reqps",
        stack=True,
        description="Pulls answered per second by response code and whether they were held.",
    )
    client_pull_tps = timeseries(
        "Client pull TPS",
        [target(sum_by(["group", "topic"], sel(N.CLIENT_PULL_TPS.gauge, *CLIENT)), "{{group}} {{topic}}")],
        unit="reqps",
        description="Pulls per second as the consumers count them (rocketmq_client_consumer_pull_tps).",
    )
    grpc_latency = timeseries(
        "gRPC receive latency p50 / p99, held vs not held",
        [
            target(quantile(0.5, sel(N.RPC_LATENCY_MS.bucket, INSTANCE, 'protocol_type="grpc"',
                                     'request_code="receive_message"'), ["is_long_polling"]) + " / 1000",
                   "p50 held={{is_long_polling}}"),
            target(quantile(0.99, sel(N.RPC_LATENCY_MS.bucket, INSTANCE, 'protocol_type="grpc"',
                                      'request_code="receive_message"'), ["is_long_polling"]) + " / 1000",
                   "p99 held={{is_long_polling}}"),
        ],
        unit="s",
        log_scale=True,
        description=(
            "RocketMQ 5 gRPC consumers' ReceiveMessage, arrival to answer (rocketmq_rpc_latency, "
            "protocol_type=grpc). A receive is also a pull in the panels above (one per queue it served), so "
            "its hold and service time are split there with the remoting pulls."
        ),
    )  # fmt: skip
    invisible = timeseries(
        "gRPC messages in flight (received, not acked)",
        [target(sum_by(["consumer_group", "topic"], sel(N.POP_INVISIBLE.gauge, *PULLS)), "{{consumer_group}} {{topic}}")],
        stack=True,
        description=(
            "rmqproxy_pop_invisible_messages: messages gRPC consumers received and have not acked, invisible "
            "to their group until acked or their invisible duration ends. A rising line is a slow or stuck consumer."
        ),
    )
    redeliveries = timeseries(
        "gRPC redeliveries and DLQ forwards",
        [
            target(sum_by(["consumer_group", "topic"], rate(sel(N.POP_REDELIVERIES.total, *PULLS))),
                   "redelivered {{consumer_group}} {{topic}}"),
            target(sum_by(["consumer_group", "topic"], rate(sel(N.POP_DLQ_FORWARDS.total, *PULLS))),
                   "to DLQ {{consumer_group}} {{topic}}"),
        ],
        unit="reqps",
        description=(
            "Deliveries past a message's first (not acked in time, or given back with a new invisible duration), "
            "and messages put in the group's DLQ past its attempts (rmqproxy_pop_redeliveries_total, "
            "rmqproxy_pop_dlq_forwards_total)."
        ),
    )  # fmt: skip
    return dashboard(
        uid="rmqproxy-pull-path",
        title="rmqproxy / Pull path",
        description="Client pull RT next to the server's split of it into hold and service time.",
        tags=["pull"],
        templating=variables(
            instance=N.RPC_LATENCY_MS.count, topic=N.PULL_LATENCY.count, consumer_group=N.PULL_LATENCY.count
        ),
        rows=[
            ("Client vs server", [client_vs_server, latency_quantiles, service_p99]),
            ("Holds", [hold_heatmap, hold_quantiles, wakes]),
            ("Held pulls and deadlines", [(held_total, 4), (held_by_group, 8), overshoot_quantiles]),
            ("Pull traffic", [pull_codes, client_pull_tps]),
            ("gRPC consumers", [grpc_latency, invisible, redeliveries]),
        ],
    )
