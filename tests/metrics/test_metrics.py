"""Metrics through the whole server on task.Clock, read back with ``get_sample_value``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

from codec.bodies import LockBatchRequestBody, MessageQueue
from codec.codes import PullSysFlag, RequestCode as C
from rmqproxy.observe.metrics import OTHER, LATENCY_BUCKETS, LabelLimiter, Metrics, ReactorCounter, ReactorHistogram

from ..server.harness import Client

COMMON = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "rmqproxy-a"}


def test_pull_latency_is_split_into_hold_and_service_time(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path)
    r = server.registry
    consumer, producer = Client(server, "c@1"), Client(server, "p@1")
    consumer.heartbeat("cg", {"T": "*"})
    producer.send_message("T", b"x")
    opaque = consumer.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    reactor.advance(3)
    producer.send_message("T", b"y")
    consumer.answer(opaque)
    timed_out = consumer.pull_message("T", 2, sys_flag=PullSysFlag.SUSPEND)
    reactor.advance(15)
    consumer.answer(timed_out)
    labels = {"topic": "T", "consumer_group": "cg"}
    assert r.get_sample_value("rmqproxy_pull_hold_seconds_count", {**labels, "wake": "arrival"}) == 1
    assert r.get_sample_value("rmqproxy_pull_hold_seconds_sum", {**labels, "wake": "arrival"}) == 3.0
    assert r.get_sample_value("rmqproxy_pull_hold_seconds_sum", {**labels, "wake": "timeout"}) == 15.0
    assert r.get_sample_value("rmqproxy_hold_wakeups_total", {**labels, "wake": "timeout"}) == 1
    assert r.get_sample_value("rmqproxy_pull_service_seconds_sum", labels) == 0.0  # no clock time passed
    held = {**labels, "code": "SUCCESS", "held": "true"}
    assert r.get_sample_value("rmqproxy_pull_latency_seconds_count", held) == 1
    assert r.get_sample_value("rmqproxy_pull_latency_seconds_bucket", {**held, "le": "2.5"}) == 0
    assert r.get_sample_value("rmqproxy_pull_latency_seconds_bucket", {**held, "le": "5.0"}) == 1
    assert r.get_sample_value("rmqproxy_pull_hold_overshoot_seconds_count") == 1
    assert r.get_sample_value("rmqproxy_pull_hold_overshoot_seconds_sum") == 0.0


def test_held_pulls_gauge_reads_the_live_table(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, max_held_pulls=7)
    assert server.registry.get_sample_value("rmqproxy_held_pulls_limit") == 7
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    client.pull_message("T", 1, sys_flag=PullSysFlag.SUSPEND)
    client.pull_message("T", 0, queue_id=1, sys_flag=PullSysFlag.SUSPEND)  # an empty queue at offset 0 is held too
    assert server.registry.get_sample_value("rmqproxy_held_pulls", {"topic": "T", "consumer_group": "cg"}) == 2
    client.conn.connectionLost(None)
    assert server.registry.get_sample_value("rmqproxy_held_pulls", {"topic": "T", "consumer_group": "cg"}) is None


def test_rocketmq_5x_broker_metrics_keep_their_names_and_labels(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path)
    r = server.registry
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    for _ in range(3):
        client.send_message("T", b"12345")
    client.answer(client.pull_message("T", 0))
    client.call(C.UPDATE_CONSUMER_OFFSET, consumer_group="cg", topic="T", queue_id=0, commit_offset=1)
    produced = {**COMMON, "topic": "T", "message_type": "normal", "is_system": "false"}
    assert r.get_sample_value("rocketmq_messages_in_total", produced) == 3
    assert r.get_sample_value("rocketmq_throughput_in_total", produced) > 3 * 5
    consumed = {**COMMON, "topic": "T", "consumer_group": "cg", "is_retry": "false", "is_system": "false"}
    assert r.get_sample_value("rocketmq_messages_out_total", consumed) == 3
    assert r.get_sample_value("rocketmq_consumer_lag_messages", consumed) == 2
    assert r.get_sample_value("rocketmq_consumer_inflight_messages", consumed) == 2
    rpc = {**COMMON, "protocol_type": "remoting", "request_code": "send_message_v2", "response_code": "success",
           "is_long_polling": "false"}  # fmt: skip
    assert r.get_sample_value("rocketmq_rpc_latency_count", rpc) == 3
    conns = {**COMMON, "consumer_group": "cg", "language": "java", "version": "409", "consume_mode": "push",
             "protocol_type": "remoting", "is_system": "false"}  # fmt: skip
    assert r.get_sample_value("rocketmq_consumer_connections", conns) == 1


def test_lock_metrics(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, lock_release_on_disconnect="immediate")
    a, b = Client(server, "a@1"), Client(server, "b@1")
    mq = [MessageQueue("T", "rmqproxy-a", 0)]
    a.send_message("T")  # only queues of existing topics are locked
    a.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody("og", "a@1", None, mq).to_json())
    b.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody("og", "b@1", None, mq).to_json())
    r = server.registry
    assert r.get_sample_value("rmqproxy_locked_queues", {"consumer_group": "og"}) == 1
    assert r.get_sample_value("rmqproxy_lock_requests_total", {"consumer_group": "og", "op": "lock",
                                                               "outcome": "refused"}) == 1  # fmt: skip
    a.conn.connectionLost(None)
    reactor.advance(0.5)
    b.call(C.LOCK_BATCH_MQ, body=LockBatchRequestBody("og", "b@1", None, mq).to_json())
    assert r.get_sample_value("rmqproxy_lock_handoff_seconds_sum", {"consumer_group": "og"}) == 0.5


def test_client_view_comes_from_consumer_running_info(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, client_stats_interval_s=60)
    consumer = Client(server, "c@1#7")
    consumer.heartbeat("cg", {"T": "*"})
    consumer.read()
    reactor.advance(60)
    (asked,) = [c for c in consumer.read() if c.code == C.GET_CONSUMER_RUNNING_INFO]
    body = (b'{"properties":{},"subscriptionSet":[],"mqTable":{},"statusTable":{"T":{"pullRT":15003.2,'
            b'"pullTPS":0.5,"consumeRT":1.5,"consumeOKTPS":0.5,"consumeFailedTPS":0.0,"consumeFailedMsgs":2}}}')
    consumer.conn.dataReceived(asked.response(0, body=body).encode())
    labels = {"clientAddr": consumer.conn.remote, "clientId": "c@1#7", "group": "cg", "topic": "T"}
    assert server.registry.get_sample_value("rocketmq_client_consumer_pull_rt", labels) == 15003.2
    assert server.registry.get_sample_value("rocketmq_client_consume_fail_msg_count", labels) == 2
    silent = Client(server, "s@1")
    silent.heartbeat("cg", {"T": "*"})
    reactor.advance(60)  # neither answers this round
    reactor.advance(5)
    assert server.registry.get_sample_value("rmqproxy_client_stats_failures_total", {"group": "cg"}) == 2
    assert server.registry.get_sample_value("rocketmq_client_consumer_pull_rt", labels) is None  # not stale
    consumer.heartbeat("cg", {"T": "*"})  # stays connected (channel expiry is 120 s)
    reactor.advance(55)
    (asked,) = [c for c in consumer.read() if c.code == C.GET_CONSUMER_RUNNING_INFO]
    consumer.conn.dataReceived(asked.response(0, body=b"{not json").encode())
    assert server.registry.get_sample_value("rmqproxy_client_stats_failures_total", {"group": "cg"}) == 3


def test_label_values_are_bounded_and_retry_topics_grouped() -> None:
    limit = LabelLimiter(2)
    assert [limit(t) for t in ("a", "b", "c", "a", "%RETRY%g1", "%DLQ%g2")] == ["a", "b", OTHER, "a", "%RETRY%",
                                                                                 "%DLQ%"]  # fmt: skip


def test_reactor_metrics_expose_what_prometheus_client_would() -> None:
    """Same observations (bucket edges included) give the same exposition text, but for the
    ``_created`` series prometheus_client adds."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    h1 = ReactorHistogram("x_seconds", "X.", ["a", "b"], buckets=LATENCY_BUCKETS, registry=ours)
    h2 = Histogram("x_seconds", "X.", ["a", "b"], buckets=LATENCY_BUCKETS, registry=theirs)
    c1 = ReactorCounter("y", "Y.", ["a"], registry=ours)
    c2 = Counter("y_total", "Y.", ["a"], registry=theirs)
    for value in (0, 0.0005, 0.0007, 1, 1.5, 30, 31, 0.25):
        for a in ("p", "q"):
            h1.labels(a, "z").observe(value)
            h2.labels(a, "z").observe(value)
            c1.labels(a).inc(value)
            c2.labels(a).inc(value)
    c1.labels("idle")
    c2.labels("idle")
    expected = [line for line in generate_latest(theirs).decode().splitlines() if "_created" not in line]
    assert generate_latest(ours).decode().splitlines() == expected


def test_metrics_exporter_disable_measures_nothing(servers, tmp_path) -> None:
    server, reactor = servers(tmp_path, metrics_exporter="DISABLE")
    client = Client(server)
    client.heartbeat("cg", {"T": "*"})
    client.send_message("T")
    client.answer(client.pull_message("T", 0))
    r = server.registry
    assert r.get_sample_value("rocketmq_messages_in_total", {**COMMON, "topic": "T", "message_type": "normal",
                                                             "is_system": "false"}) is None  # fmt: skip
    assert not [s for f in r.collect() if f.name == "rmqproxy_pull_latency_seconds" for s in f.samples]
    client.read()
    reactor.advance(server.config.client_stats_interval_s + 1)  # and no client is asked for its statistics
    assert not [c for c in client.read() if c.code == C.GET_CONSUMER_RUNNING_INFO]
