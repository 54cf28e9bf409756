"""What the HyperPod Inference Operator puts into the Deployment it renders from an InferenceEndpointConfig.

The operator is closed source: the facts come from its CRD's field descriptions, AWS's SDK, the samples of
its Helm chart and the reference deployment, and live as data with their sources in
tools/kvtier/facts/hyperpod_operator.yaml. Where no public source says a fact, it is `known=False` and the
rules that need it warn instead of refusing (kvtier.validate.checks.hyperpod_pod, which builds the pod).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from kvtier import facts as shipped

DATA = shipped.HERE / "hyperpod_operator.yaml"


@dataclass(frozen=True)
class Fact:
    what: str  # what the operator does, in a sentence
    source: str  # where it is said (file + commit/tag, or URL)
    known: bool = True  # False: no public source says it; the rules warn and name this fact


def _load() -> dict[str, Any]:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
        raise shipped.FactsError(f"{DATA}: expected a mapping with facts")
    return data


_DATA = _load()
FACTS_BY_NAME: dict[str, Fact] = {
    name: Fact(str(entry["what"]), str(entry["source"]), entry.get("known") is True)
    for name, entry in _DATA["facts"].items()
}
FACTS: tuple[Fact, ...] = tuple(FACTS_BY_NAME.values())

# --- the worker container and the model volume --------------------------------------------------------
WORKER_CONTAINER = FACTS_BY_NAME["worker_container"]
MODEL_MOUNT_DEFAULT = str(_DATA["model_mount_default"])
MODEL_MOUNT = FACTS_BY_NAME["model_mount"]
MODEL_VOLUME_NAME = FACTS_BY_NAME["model_volume_name"]
MODEL_VOLUME_SOURCE = FACTS_BY_NAME["model_volume_source"]
MODEL_MOUNT_READ_ONLY = FACTS_BY_NAME["model_mount_read_only"]
EXTRA_VOLUMES = FACTS_BY_NAME["extra_volumes"]
OTHER_VOLUMES = FACTS_BY_NAME["other_volumes"]
# --- environment and arguments --------------------------------------------------------------------------
WORKER_ENV = FACTS_BY_NAME["worker_env"]
WORKER_ARGS = FACTS_BY_NAME["worker_args"]
HF_TOKEN = FACTS_BY_NAME["hf_token"]
L2_ENV = FACTS_BY_NAME["l2_env"]
OTHER_ENV = FACTS_BY_NAME["other_env"]
SIDECAR_MOUNTS = FACTS_BY_NAME["sidecar_mounts"]

# Variables the operator is known to set in the worker for an L2 backend (L2_ENV).
OPERATOR_L2_ENV: tuple[str, ...] = tuple(_DATA["l2_env"]["names"])
# The worker fields of the CRD: what the operator reads from spec.worker. Anything else under worker is not
# in the structural schema, so the API server prunes it and the operator never sees it.
WORKER_FIELDS: tuple[str, ...] = tuple(_DATA["worker_fields"]["names"])
WORKER_FIELDS_SOURCE = str(_DATA["worker_fields"]["source"])
