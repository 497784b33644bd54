"""The committed rules file passes ``promtool check rules``, and each rule fires on a bad series and
stays quiet on a healthy one (``promtool test rules`` over synthetic series, minute by minute).

Firing is read from the ``ALERTS`` series the rule evaluations write, so a case names the alert's
labels without repeating its annotations.
"""

from __future__ import annotations

import subprocess

import yaml

from dashboards import alerts

from .exprs import ALERTS, rules
from .prometheus import require


def test_promtool_accepts_the_rules_file() -> None:
    run = subprocess.run(
        [require("promtool"), "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(alerts.rules())} rules found" in run.stdout


def test_each_rule_has_probes_that_appear_in_its_expression() -> None:
    committed = {r["alert"]: r for r in rules()}
    assert set(committed) == {r.alert for r in alerts.rules()}
    for rule in alerts.rules():
        assert rule.probes, rule.alert
        for probe in rule.probes:
            assert probe in rule.expr, (rule.alert, probe)
        assert committed[rule.alert]["expr"] == rule.expr
        assert {"summary", "description"} <= set(committed[rule.alert]["annotations"])
        assert committed[rule.alert]["labels"]["severity"] in {"info", "warning", "critical"}


def series(name: str, values: str, **labels: str) -> dict:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def firing(alertname: str, at: str, *expected: dict) -> dict:
    """A check that at ``at`` exactly the ``expected`` label sets of ``alertname`` are firing."""
    samples = []
    for labels in expected:
        every = sorted({"alertname": alertname, "alertstate": "firing", **labels}.items())
        samples.append({"labels": "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in every) + "}", "value": 1})
    return {
        "expr": f'ALERTS{{alertname="{alertname}",alertstate="firing"}}',
        "eval_time": at,
        "exp_samples": samples,
    }


SERVICE = "rmqproxy_pull_service_seconds_bucket"


def hist(name: str, buckets: dict[str, str], **labels: str) -> list[dict]:
    return [series(name, values, **labels, le=le) for le, values in buckets.items()]


def test_rules_fire_on_bad_series_only(tmp_path) -> None:
    cap = 1000
    lag = {"is_system": "false", "is_retry": "false", "topic": "t"}
    cases = [
        {   # instance a answers every pull within 50 ms; b takes 50-250 ms
            "input_series": [
                *hist(SERVICE, {"0.05": "0+100x30", "0.25": "0+100x30", "+Inf": "0+100x30"}, instance="a", topic="t"),
                *hist(SERVICE, {"0.05": "0x30", "0.25": "0+100x30", "+Inf": "0+100x30"}, instance="b", topic="t"),
            ],
            "promql_expr_test": [
                firing("RmqproxyPullServiceTimeHigh", "9m"),  # for: 10m not yet over
                firing("RmqproxyPullServiceTimeHigh", "20m", {"instance": "b", "severity": "warning"}),
            ],
        },
        {   # held pulls summed over groups: a is at 95 % of its cap; b holds as many, under a doubled cap
            "input_series": [
                series("rmqproxy_held_pulls", f"{int(cap * 0.5)}x20", instance="a", topic="t1", consumer_group="g"),
                series("rmqproxy_held_pulls", f"{int(cap * 0.45)}x20", instance="a", topic="t2", consumer_group="g"),
                series("rmqproxy_held_pulls_limit", f"{cap}x20", instance="a"),
                series("rmqproxy_held_pulls", f"{int(cap * 0.95)}x20", instance="b", topic="t1", consumer_group="g"),
                series("rmqproxy_held_pulls_limit", f"{2 * cap}x20", instance="b"),
            ],
            "promql_expr_test": [firing("RmqproxyHeldPullsNearCap", "10m", {"instance": "a", "severity": "critical"})],
        },
        {   # 4 locked queues; g1 hands one over every minute (15 in 15 m), g2 every five minutes
            "input_series": [
                series("rmqproxy_lock_handoff_seconds_count", "0+1x40", instance="a", consumer_group="g1"),
                series("rmqproxy_lock_handoff_seconds_count", "0+0.2x40", instance="a", consumer_group="g2"),
                series("rmqproxy_locked_queues", "4x40", instance="a", consumer_group="g1"),
                series("rmqproxy_locked_queues", "4x40", instance="a", consumer_group="g2"),
            ],
            "promql_expr_test": [
                firing("RmqproxyLockChurn", "30m", {"instance": "a", "consumer_group": "g1", "severity": "warning"})
            ],
        },
        {   # g1 grows past 1000; g2 is high but shrinking; g3 grows but stays small
            "input_series": [
                series("rocketmq_consumer_lag_messages", "1000+50x60", instance="a", consumer_group="g1", **lag),
                series("rocketmq_consumer_lag_messages", "5000-50x60", instance="a", consumer_group="g2", **lag),
                series("rocketmq_consumer_lag_messages", "0+5x60", instance="a", consumer_group="g3", **lag),
            ],
            "promql_expr_test": [
                firing("RmqproxyConsumerLagGrowing", "14m"),
                firing(
                    "RmqproxyConsumerLagGrowing", "40m",
                    {"instance": "a", "topic": "t", "consumer_group": "g1", "severity": "warning"},
                ),
            ],
        },
        {   # g1 fails every poll; g2 failed once long ago
            "input_series": [
                series("rmqproxy_client_stats_failures_total", "0+1x20", instance="a", group="g1"),
                series("rmqproxy_client_stats_failures_total", "1x20", instance="a", group="g2"),
            ],
            "promql_expr_test": [
                firing("RmqproxyClientStatsFailing", "15m", {"instance": "a", "group": "g1", "severity": "warning"})
            ],
        },
        {   # push groups g1 and g2 are connected, only g1 reports; g3 is a pull consumer (never reports)
            "input_series": [
                series("rocketmq_consumer_connections", "1x20", instance="a", consumer_group="g1", consume_mode="push"),
                series("rocketmq_consumer_connections", "1x20", instance="a", consumer_group="g2", consume_mode="push"),
                series("rocketmq_consumer_connections", "1x20", instance="a", consumer_group="g3", consume_mode="pull"),
                series(
                    "rocketmq_client_consumer_pull_rt", "12x20",
                    instance="a", group="g1", topic="t", clientId="c1", clientAddr="x:1",
                ),
            ],
            "promql_expr_test": [
                firing("RmqproxyClientMetricsMissing", "9m"),
                firing(
                    "RmqproxyClientMetricsMissing", "15m", {"instance": "a", "consumer_group": "g2", "severity": "info"}
                ),
            ],
        },
    ]
    for case in cases:
        case["interval"] = "1m"
    spec = tmp_path / "alerts_test.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(ALERTS)], "evaluation_interval": "1m", "tests": cases}))
    run = subprocess.run([require("promtool"), "test", "rules", str(spec)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
