"""Runs inside the HyperPod SDK's own venv (.venv-hyperpod: toolchain/side-venv.sh), never in kvtier's.

kvtier starts it as `python hyperpod_sdk_worker.py <command>` with JSON on stdin and reads JSON on stdout
(tools/kvtier/upstream/hyperpod_sdk.py). Standard library plus the SDK only: it must not import kvtier.

Commands:
- `schemas`: the JSON schemas (field names, not the snake_case aliases) of the SDK's models of the
  InferenceEndpointConfig and JumpStartModel spec and status, and the installed versions.
- `validate`: stdin {"specs": [spec, ...]}; each spec through the SDK's `_HPEndpoint` model, answering
  one list of {"loc", "type", "msg"} per spec (empty: valid). The SDK's nested models forbid unknown
  fields, but `_HPEndpoint` itself ignores them (extra="ignore"): top-level keys it does not know are
  answered too, as type "extra_ignored", so that they are not passed over in silence.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

DISTRIBUTIONS = ("sagemaker-hyperpod", "hyperpod-custom-inference-template", "pydantic")


def _models() -> dict[str, Any]:
    from sagemaker.hyperpod.inference.config import hp_endpoint_config as endpoint
    from sagemaker.hyperpod.inference.config import hp_jumpstart_endpoint_config as jumpstart

    return {
        "InferenceEndpointConfig": (endpoint._HPEndpoint, endpoint.InferenceEndpointConfigStatus),
        "JumpStartModel": (jumpstart._HPJumpStartEndpoint, jumpstart.JumpStartModelStatus),
    }


def schemas(_: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"versions": {d: version(d) for d in DISTRIBUTIONS}, "kinds": {}}
    for kind, (spec, status) in _models().items():
        out["kinds"][kind] = {
            "spec": spec.model_json_schema(by_alias=False),
            "status": status.model_json_schema(by_alias=False),
            "model": f"{spec.__module__}.{spec.__name__}",
        }
    return out


def validate(payload: dict[str, Any]) -> dict[str, Any]:
    from pydantic import ValidationError

    spec_model = _models()["InferenceEndpointConfig"][0]
    known = set(spec_model.model_fields)
    known |= {f.alias for f in spec_model.model_fields.values() if f.alias}
    results = []
    for spec in payload.get("specs", []):
        found = []
        try:
            spec_model.model_validate(spec)
        except ValidationError as error:
            found = [{"loc": list(e["loc"]), "type": e["type"], "msg": e["msg"]} for e in error.errors()]
        if spec_model.model_config.get("extra") != "forbid" and isinstance(spec, dict):
            found += [
                {"loc": [key], "type": "extra_ignored", "msg": "not a field of the model (ignored by it)"}
                for key in spec
                if key not in known
            ]
        results.append(found)
    return {"results": results, "model": f"{spec_model.__module__}.{spec_model.__name__}"}


COMMANDS = {"schemas": schemas, "validate": validate}


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: {sys.argv[0]} {{{','.join(COMMANDS)}}} < request.json", file=sys.stderr)
        return 2
    text = sys.stdin.read()
    payload = json.loads(text) if text.strip() else {}
    json.dump(COMMANDS[sys.argv[1]](payload), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
