"""Every manifest the curvine chart renders (defaults, ci scenarios, values/ environments) passes the
strict Kubernetes OpenAPI schemas of 1.30 through 1.35 (PyPI kubernetes-validate, strict mode)."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
from curvine_scenarios import names, values_files
from render import helm_bin, render_docs

KUBE_MINORS = [f"1.{m}.0" for m in range(30, 36)]
# Custom resources have no schema in kubernetes-validate; their shape is covered by helm-unittest.
CRD_KINDS = {"ServiceMonitor"}


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("scenario", names())
def test_rendered_manifests_pass_strict_schemas(scenario: str, major: int, tmp_path: Path, need) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built (make tools)")
    docs = render_docs("curvine", values=values_files(scenario, tmp_path), major=major)
    checked = [d for d in docs if d["kind"] not in CRD_KINDS]
    assert {"ConfigMap", "StatefulSet", "DaemonSet", "Service"} <= {d["kind"] for d in checked}
    errors = []
    for minor in KUBE_MINORS:
        for doc in checked:
            try:
                kubernetes_validate.validate(doc, minor, strict=True)
            except kubernetes_validate.ValidationError as err:
                errors.append(
                    f"{minor} {doc['kind']}/{doc['metadata']['name']}: {err.message} at {list(err.path)}"
                )
    assert not errors, "\n".join(errors)


def test_strict_mode_rejects_an_unknown_field(need) -> None:
    # Guards the test above against a validator that accepts anything.
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    [sts] = [d for d in render_docs("curvine") if d["kind"] == "StatefulSet"]
    sts["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/", "port": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, KUBE_MINORS[0], strict=True)
