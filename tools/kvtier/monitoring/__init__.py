"""The chart's alerts and dashboard checked by the real tools: promtool for the rules and the dashboard's
queries (promtool.py), and the metric names they read against what the real exporters serve (names.py)."""
