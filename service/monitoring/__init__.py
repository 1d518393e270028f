"""Monitoring: Prometheus metrics and the readiness checks of ``GET /readyz``."""
