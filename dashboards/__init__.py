"""Grafana dashboards and Prometheus alert rules generated from code (docs/operations.md, Metrics).

``python -m dashboards`` writes ``json/*.json`` (Pull path, Orderly & locks, Broker overview) and
``alerts.yml``; both are committed, and a test keeps them equal to what the generator makes.
Metric names come from ``rmqproxy.observe.metrics`` (``names``), thresholds from ``alerts``.
"""
