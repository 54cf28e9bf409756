"""What the chart's HyperPod L2 patch sets per endpoint, read back from its rendered MutatingAdmissionPolicy.

The patch picks each endpoint's value with a CEL map indexed by the Deployment's name,
`{"<endpoint>": "<value>", ...}[object.metadata.name]` (templates/_hyperpod.tpl, l2ByEndpointCel); a CEL
map of double-quoted literals with JSON escapes is a JSON object, so it reads back with json.
"""

from __future__ import annotations

import json
from typing import Any

INDEX = "[object.metadata.name]"


def by_endpoint(policy: dict[str, Any], variable: str) -> dict[str, str]:
    """The policy variable `variable` (l2env, or adapter in MultiProcess mode) as {endpoint: value}."""
    (expression,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == variable]
    if not expression.endswith(INDEX):
        raise ValueError(f"variable {variable} is not an endpoint map: {expression}")
    values = json.loads(expression.removesuffix(INDEX))
    return {str(name): str(value) for name, value in values.items()}


def applied_env(policy: dict[str, Any], endpoint: str) -> dict[str, str]:
    """The variables the policy's ApplyConfiguration sets on `endpoint`'s cache container: literals, and the
    one whose value is the per-endpoint variable l2env resolved to the endpoint's value."""
    (apply,) = [m for m in policy["spec"]["mutations"] if m["patchType"] == "ApplyConfiguration"]
    env = {}
    for entry in apply["applyConfiguration"]["expression"].split("env{name: ")[1:]:
        name, value = entry.split(", value: ", 1)
        value = value.split("}", 1)[0]
        own = by_endpoint(policy, "l2env")[endpoint] if value == "variables.l2env" else None
        env[json.loads(name)] = own if own is not None else json.loads(value)
    return env
