"""`kvtier validate`: the layers of checks over environment values files.

loader (YAML with positions) -> schema_check (umbrella JSON Schema) -> rules (cross-field rules as data,
values_rules + policy) -> render (Helm 3/4) -> kube (Kubernetes schemas per minor) -> configs (LMCache,
Curvine) -> report (tables, JSON). engine runs them in that order.
"""
