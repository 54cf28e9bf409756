"""The dashboard JSON against Grafana's own dashboard models (grafana-foundation-sdk, Grafana Labs' typed
models generated from Grafana's schemas; pinned in toolchain/versions.env).

The SDK decodes what it knows and drops the rest, so a round trip through it keeps every key Grafana's
schema has: `dropped_keys` lists the paths of the ones it lost (a misspelt `gridPos`, a field of another
panel type), and an empty list means the dashboard is made of Grafana's fields only.
"""

from __future__ import annotations

import json
from typing import Any

from kvtier.errors import UserError


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda o: o.to_json() if hasattr(o, "to_json") else str(o)))


def round_trip(dashboard: dict[str, Any]) -> dict[str, Any]:
    try:
        from grafana_foundation_sdk.models.dashboard import Dashboard
    except ImportError:
        raise UserError("grafana-foundation-sdk is not installed; run `make tools`") from None
    return _plain(Dashboard.from_json(dashboard).to_json())


def dropped_keys(original: Any, decoded: Any, path: str = "") -> list[str]:
    """Paths present in `original` and missing from `decoded`."""
    lost: list[str] = []
    if isinstance(original, dict):
        for key, value in original.items():
            if not isinstance(decoded, dict) or key not in decoded:
                lost.append(f"{path}/{key}")
            else:
                lost += dropped_keys(value, decoded[key], f"{path}/{key}")
    elif isinstance(original, list) and isinstance(decoded, list):
        for index, (a, b) in enumerate(zip(original, decoded, strict=False)):
            lost += dropped_keys(a, b, f"{path}[{index}]")
    return lost
