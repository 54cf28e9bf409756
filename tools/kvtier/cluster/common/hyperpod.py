"""The HyperPod Inference Operator's CRDs, installed on the test API server.

Two sources, the same file names: the CRDs derived from AWS's SDK (kvtier.upstream.hyperpod_crd, written
to a folder of the caller's, e.g. a temporary one), which every checkout can make, and, where present,
the operator's real ones in ../shared/fixtures/hyperpod-inference-operator (see its README), compared with
the derived ones by a test. The real files are rendered by the operator's chart through `tpl`, so they
still hold `{{ .Values.* }}` in the cert-manager annotation and the conversion webhook. Here there is no
webhook (and tests must not dial one), so the CA annotation is dropped and conversion set to None; the
structural schemas, which are what tests validate against, stay untouched. The operator itself is closed
source and is not run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from kvtier import paths
from kvtier.cluster.common import crds
from kvtier.cluster.common.rest import Rest
from kvtier.errors import UserError

CRD_FILES = ("inferenceendpointconfigs.crd.yaml", "jumpstartmodels.crd.yaml")


def fixtures_dir() -> Path:
    """Where the real CRDs may be (optional): $KVTIER_HYPERPOD_FIXTURES, else
    ../shared/fixtures/hyperpod-inference-operator next to the checkout."""
    env = os.environ.get("KVTIER_HYPERPOD_FIXTURES")
    return Path(env) if env else paths.ROOT.parent / "shared" / "fixtures" / "hyperpod-inference-operator"


def crd_manifests(folder: Path) -> list[dict[str, Any]]:
    """The CRDs in `folder` (derived or real), made installable without the operator's webhook."""
    found = []
    for name in CRD_FILES:
        file = folder / name
        if not file.is_file():
            raise UserError(
                f"HyperPod operator CRD {file} not found; set KVTIER_HYPERPOD_FIXTURES to the "
                "folder holding the operator's CRD files"
            )
        crd = yaml.safe_load(file.read_text())
        (crd["metadata"].get("annotations") or {}).pop("cert-manager.io/inject-ca-from", None)
        crd["spec"]["conversion"] = {"strategy": "None"}
        found.append(crd)
    return found


def install_crds(rest: Rest, folder: Path, timeout: float = 60) -> list[str]:
    """Create (or replace) the CRDs in `folder` and wait until the API server serves them; their names."""
    return crds.install(rest, crd_manifests(folder), timeout)
