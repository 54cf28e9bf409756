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
    """The policy variable `variable` (l2url, or adapter in MultiProcess mode) as {endpoint: value}."""
    (expression,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == variable]
    if not expression.endswith(INDEX):
        raise ValueError(f"variable {variable} is not an endpoint map: {expression}")
    values = json.loads(expression.removesuffix(INDEX))
    return {str(name): str(value) for name, value in values.items()}
