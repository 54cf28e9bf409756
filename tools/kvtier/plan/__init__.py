"""`kvtier plan`: what each KV tier holds and when the shared L2 pays off, for one environment.

inputs (values file -> Deployments) -> capacity (the byte and latency model) -> report (tables).
facts holds the data it is calibrated on: shipped model configs, GPU instance types and the
reference deployment's measurements. The validate rules that size L1 reuse inputs.
"""
