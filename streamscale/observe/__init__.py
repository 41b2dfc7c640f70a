"""Observability: Prometheus metrics of running work, self-contained HTML page parts, a live page."""
