"""Every image a release makes the cluster pull: the pinned Helm renders the release as `helm install`
would (hooks, `helm test` pods and subcharts included), and each object that makes pods is read.

Pods come from the workload kinds of kvtier.manifests (init, regular and ephemeral containers), and from
the objects an operator turns into pods: HyperPod's InferenceEndpointConfig names its worker image.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvtier import helm, manifests, paths
from kvtier.errors import UserError
from kvtier.images import reference

UMBRELLA = paths.CHARTS / "kv-tiered-inference"
RELEASE = "kvtier"  # no image depends on the release's name or namespace
NAMESPACE = "default"
CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")
# Objects an operator turns into pods: the field path of the image, and the container it becomes.
OPERATOR_IMAGES = {"InferenceEndpointConfig": ("spec.worker.image", "worker")}


@dataclass(frozen=True)
class Use:
    kind: str
    name: str
    container: str


@dataclass
class Image:
    image: str  # exactly as rendered: what the kubelet is given
    reference: reference.Reference
    used_by: list[Use] = field(default_factory=list)


def _uses(rendered: Iterable[dict[str, Any]]) -> Iterable[tuple[str, Use]]:
    for m in rendered:
        kind, name = str(m.get("kind")), str(manifests.at(m, "metadata.name"))
        spec = manifests.pod_spec(m)
        for key in CONTAINER_FIELDS if spec is not None else ():
            listed = spec.get(key) if spec is not None else None
            for c in listed if isinstance(listed, list) else []:
                if isinstance(c, dict) and c.get("image"):
                    yield str(c["image"]), Use(kind, name, str(c.get("name", "")))
        if kind in OPERATOR_IMAGES:
            where, container = OPERATOR_IMAGES[kind]
            image = manifests.at(m, where)
            if image:
                yield str(image), Use(kind, name, container)


def pulled(rendered: Iterable[dict[str, Any]]) -> list[Image]:
    """The images of rendered objects, one entry per reference as written, sorted. A reference the
    kubelet could not pull is a UserError naming the object and container."""
    found: dict[str, Image] = {}
    for text, use in _uses(rendered):
        if text not in found:
            try:
                found[text] = Image(text, reference.parse(text))
            except ValueError as error:
                raise UserError(
                    f"{use.kind}/{use.name} container {use.container}: image {text!r} is not a reference "
                    f"the kubelet can pull ({error}); fix the image values that render it"
                ) from None
        if use not in found[text].used_by:
            found[text].used_by.append(use)
    return _sorted(found)


def _sorted(found: dict[str, Image]) -> list[Image]:
    """By reference, each image's users by kind, name and container: the same output for the same render."""
    for image in found.values():
        image.used_by.sort(key=lambda u: (u.kind, u.name, u.container))
    return [found[text] for text in sorted(found)]


def _inputs(values: Sequence[Path], overlay: Sequence[str]) -> str:
    """The render's inputs as the user gave them, for an error message."""
    given = [f"-f {v}" for v in values] + list(overlay)
    return " ".join(given) if given else "the chart's default values"


def render(chart: Path, values: Sequence[Path] = (), overlay: Sequence[str] = ()) -> list[dict[str, Any]]:
    """`helm template` of `chart` with the values files in order, then `overlay` (more -f, --set)."""
    try:
        helm.build_dependencies(chart)
    except subprocess.CalledProcessError as error:
        raise UserError(
            f"{chart}: helm dependency update failed: {helm.clean_error(error.stderr or '')}"
        ) from None
    except (OSError, yaml.YAMLError) as error:
        raise UserError(f"{chart}: cannot prepare the chart's dependencies: {error}") from None
    template = helm.Template(chart, RELEASE, values, overlay, namespace=NAMESPACE, allow_override=True)
    try:
        return template.render().manifests
    except helm.TemplateError as error:
        raise UserError(f"{_inputs(values, overlay)}: Helm cannot render {chart.name}: {error}") from None


def release_images(chart: Path, values: Sequence[Path] = (), overlay: Sequence[str] = ()) -> list[Image]:
    """Every image the release of `chart` with these values pulls."""
    return pulled(render(chart, values, overlay))


def merged(lists: Iterable[list[Image]]) -> list[Image]:
    """Several renders' images as one list (environments mirrored together)."""
    found: dict[str, Image] = {}
    for images in lists:
        for image in images:
            kept = found.setdefault(image.image, Image(image.image, image.reference))
            kept.used_by.extend(u for u in image.used_by if u not in kept.used_by)
    return _sorted(found)
