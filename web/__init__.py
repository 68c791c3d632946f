"""The tracker's web surface: the JSON API, the dashboard, Prometheus metrics, the check
views, and the read models behind them (queue scan, queue stats)."""
