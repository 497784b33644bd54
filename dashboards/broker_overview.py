"""The "Broker overview" dashboard: traffic, lag, connections, requests and the store.

Mostly RocketMQ 5.x broker names (``rocketmq_*``, docs/operations.md: Metrics), so the same panels read a
5.x broker too; ``rocketmq_rpc_latency`` is in milliseconds there and here. The last row is about
the consumers rmqproxy polls for their own statistics.
"""

from __future__ import annotations

from . import alerts
from . import names as N
from .panels import dashboard, stat, target, timeseries, variables
from .promql import quantile, rate, sel, sum_by

INSTANCE = 'instance=~"$instance"'
TOPIC = 'topic=~"$topic"'
GROUP = 'consumer_group=~"$consumer_group"'
CLIENT_GROUP = 'group=~"$consumer_group"'
USER = 'is_system="false"'
PER_QUEUE = ["topic", "consumer_group"]


def build():
    messages = timeseries(
        "Messages in / out per second",
        [
            target(sum_by(["topic"], rate(sel(N.MESSAGES_IN.total, INSTANCE, TOPIC, USER))), "in {{topic}}"),
            target(
                sum_by(PER_QUEUE, rate(sel(N.MESSAGES_OUT.total, INSTANCE, TOPIC, GROUP, USER))),
                "out {{topic}} → {{consumer_group}}",
            ),
        ],
        unit="msg/s",
        description=(
            "Messages stored for producers (rocketmq_messages_in_total; retry and DLQ puts are not counted) and "
            "pulled by consumers (rocketmq_messages_out_total). Retry topics report as %RETRY%."
        ),
    )
    throughput = timeseries(
        "Bytes in / out per second",
        [
            target(sum_by(["topic"], rate(sel(N.THROUGHPUT_IN.total, INSTANCE, TOPIC, USER))), "in {{topic}}"),
            target(sum_by(["topic"], rate(sel(N.THROUGHPUT_OUT.total, INSTANCE, TOPIC, GROUP, USER))), "out {{topic}}"),
        ],
        unit="Bps",
    )
    retried = sel(N.MESSAGES_OUT.total, INSTANCE, GROUP, 'is_retry="true"')
    retries = timeseries(
        "Retries consumed",
        [target(sum_by(["consumer_group"], rate(retried)), "{{consumer_group}}")],
        unit="msg/s",
        description="Messages pulled from retry topics: redeliveries after RECONSUME_LATER or a consume timeout.",
    )
    lag = timeseries(
        "Consumer lag",
        [target(sum_by(PER_QUEUE, sel(N.CONSUMER_LAG.gauge, INSTANCE, TOPIC, GROUP)), "{{consumer_group}} {{topic}}")],
        description=(
            "Messages stored but not committed (rocketmq_consumer_lag_messages). RmqproxyConsumerLagGrowing fires "
            f"when it grows for {alerts.LAG_WINDOW} above {alerts.LAG_ALERT_MESSAGES}."
        ),
    )
    inflight_expr = sum_by(PER_QUEUE, sel(N.CONSUMER_INFLIGHT.gauge, INSTANCE, TOPIC, GROUP))
    inflight = timeseries(
        "In flight",
        [target(inflight_expr, "{{consumer_group}} {{topic}}")],
        description="Messages pulled but not yet committed (rocketmq_consumer_inflight_messages).",
    )
    producers = stat(
        "Producer connections",
        [target(sum_by([], sel(N.PRODUCER_CONNECTIONS.gauge, INSTANCE)), "producers")],
        description="Every Java client instance also registers its inner producer (CLIENT_INNER_PRODUCER).",
    )
    consumer_conns = sum_by(["consumer_group", "consume_mode"], sel(N.CONSUMER_CONNECTIONS.gauge, INSTANCE, GROUP))
    producer_conns = sum_by(["language", "version"], sel(N.PRODUCER_CONNECTIONS.gauge, INSTANCE))
    consumers = timeseries(
        "Consumer connections",
        [
            target(consumer_conns, "{{consumer_group}} ({{consume_mode}})"),
            target(producer_conns, "producers {{language}} {{version}}"),
        ],
        description="Connected clients per group and mode (push, pull), and producers per client version.",
    )
    answered = sel(N.RPC_LATENCY_MS.bucket, INSTANCE, 'is_long_polling="false"')
    rpc_p99 = timeseries(
        "Request latency p99 (not long polling)",
        [target(quantile(0.99, answered, ["request_code"]), "{{request_code}}")],
        unit="ms",
        log_scale=True,
        description="rocketmq_rpc_latency (ms, RocketMQ 5.x buckets) of requests answered without a hold.",
    )
    requests = sum_by(["request_code", "response_code"], rate(sel(N.RPC_LATENCY_MS.count, INSTANCE)))
    rpc_rate = timeseries(
        "Requests by response code",
        [target(requests, "{{request_code}} {{response_code}}")],
        unit="reqps",
        stack=True,
    )
    flush = timeseries(
        "Store flush (fsync) p50 / p99",
        [
            target(quantile(0.5, sel(N.STORE_FLUSH.bucket, INSTANCE)), "p50"),
            target(quantile(0.99, sel(N.STORE_FLUSH.bucket, INSTANCE)), "p99"),
        ],
        unit="s",
        description="Commit-log fsync duration (rmqproxy_store_flush_seconds); SYNC_FLUSH sends wait for it.",
    )
    flush_rate = timeseries(
        "Store flushes per second",
        [target(sum_by([], rate(sel(N.STORE_FLUSH.count, INSTANCE))), "flushes")],
        unit="ops",
    )
    failures = sum_by(["group"], rate(sel(N.CLIENT_STATS_FAILURES.total, INSTANCE, CLIENT_GROUP)))
    stats_failures = timeseries(
        "Client stats requests failing",
        [target(failures, "{{group}}")],
        unit="reqps",
        description=(
            "GET_CONSUMER_RUNNING_INFO requests that failed or timed out (rmqproxy_client_stats_failures_total); "
            "the series exists only once a group has failed. Healthy: no data."
        ),
    )
    clients = f"count by (group, clientId) ({sel(N.CLIENT_PULL_RT_MS.gauge, INSTANCE, CLIENT_GROUP)})"
    reporting = timeseries(
        "Consumers reporting client stats",
        [target(f"count by (group) ({clients})", "{{group}}")],
        description="Consumer clients whose latest GET_CONSUMER_RUNNING_INFO answer rmqproxy exports, per group.",
    )
    failed = sum_by(["group", "topic"], sel(N.CLIENT_CONSUME_FAIL_COUNT.gauge, INSTANCE, CLIENT_GROUP))
    failed_hour = timeseries(
        "Failed consumes, last hour (client-reported)",
        [target(failed, "{{group}} {{topic}}")],
        description=(
            "Messages the consumers' listeners failed (RECONSUME_LATER, exceptions, timeouts) in the last hour, as "
            "they count them (rocketmq_client_consume_fail_msg_count)."
        ),
    )
    return dashboard(
        uid="rmqproxy-broker-overview",
        title="rmqproxy / Broker overview",
        description="Message and byte rates, lag, connections, requests and store flushes.",
        tags=["broker"],
        templating=variables(
            instance=N.RPC_LATENCY_MS.count, topic=N.MESSAGES_IN.total, consumer_group=N.CONSUMER_CONNECTIONS.gauge
        ),
        rows=[
            ("Traffic", [messages, throughput, retries]),
            ("Consumers", [lag, inflight, (producers, 4), (consumers, 4)]),
            ("Requests and store", [rpc_p99, rpc_rate, flush, flush_rate]),
            ("Client statistics", [stats_failures, reporting, failed_hour]),
        ],
    )
