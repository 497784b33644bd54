"""Grafana dashboards generated from code (see DESIGN.md, Metrics)."""
