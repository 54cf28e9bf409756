"""`kvtier validate`: the layers of checks over environment values files.

loader (YAML with positions) -> schema_check (umbrella JSON Schema) -> rules on the effective values
-> render (Helm 3/4) -> kube (Kubernetes schemas per minor) -> configs (LMCache, Curvine) -> rules on
the rendered objects -> report (tables, JSON). pipeline runs them in that order.

Rules: rules.py is the framework (Rule, the @rule decorator, contexts); the *_rules modules, policy,
podsecurity and crosspod declare rules into it; catalogue.py imports them all, runs a scope's
rules and lists them (`--list-rules`, docs/validate.md).
"""
