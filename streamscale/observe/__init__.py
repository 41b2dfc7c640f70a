"""Observability: Prometheus metrics of running work, HTML reports of executions, a live page."""
