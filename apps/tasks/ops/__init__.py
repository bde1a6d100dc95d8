"""What operators read: Prometheus metrics (metrics.py, `/metrics`: views.py), OpenTelemetry
traces (tracing.py), both fed at the runner's seams (observe.py), and how stored events age
(retention.py)."""
