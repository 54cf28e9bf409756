"""The metric names the chart's alerts and dashboard read, checked against what the real exporters serve
(names.py); promtool's and Grafana's checks of the rules and dashboard are test code (tests/harness)."""
