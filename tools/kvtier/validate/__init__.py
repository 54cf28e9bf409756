"""`kvtier validate`: the layers of checks over environment values files.

inputs/ (the values as Helm sees them: loader keeps every key's line, merge and setvalues compute the
effective values, origins and provenance say where a value or rendered field came from) -> layers/ (each a
judge returning a typed outcome: schema_check, render with Helm 3/4, kube's per-minor schemas, configs for
LMCache and Curvine, the HyperPod SDK, and the live judges: server, vllm_check) -> report (tables, JSON).
pipeline runs them in that order, with options saying what a run checks against.

Rules: rules.py is the framework (Rule, the @rule decorator, contexts); the modules in checks/ declare rules
into it, grouped by topic (the *_rules modules, policy, podsecurity, crosspod, and the --context lookups
placement and references); catalogue.py imports them all, runs a scope's rules and lists them
(`--list-rules`, docs/validate.md). findings.py is what every layer and rule returns.
"""
