"""`artifacthub.io/images` lists exactly the images of the chart's default render (hooks included)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kvtier import helm, paths
from kvtier.publish import changelog

CHARTS = ("curvine", "kv-tiered-inference")


def pod_images(document: dict[str, Any]) -> Iterator[str]:
    spec = document.get("spec") or {}
    if document.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    pod = spec if document.get("kind") == "Pod" else (spec.get("template") or {}).get("spec") or {}
    for key in ("initContainers", "containers"):
        for container in pod.get(key) or []:
            yield container["image"]


@pytest.mark.parametrize("name", CHARTS)
def test_every_default_image_is_annotated(name: str, need) -> None:
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    chart = paths.CHARTS / name
    need((chart / "Chart.yaml").exists(), f"charts/{name} is not written yet")
    helm.build_dependencies(chart)
    result = helm.run(["template", "rel", str(chart), "--namespace", "ns"])
    assert result.returncode == 0, result.stderr
    rendered = {image for doc in yaml.safe_load_all(result.stdout) if doc for image in pod_images(doc)}
    assert rendered, "the default render runs at least one image"
    annotated = changelog.annotated_images(chart)
    missing, extra = sorted(rendered - annotated), sorted(annotated - rendered)
    assert not missing and not extra, (
        f"charts/{name}/Chart.yaml's artifacthub.io/images lacks {missing} and lists {extra}, which the "
        "default render does not run: run `kvtier generate`"
    )
