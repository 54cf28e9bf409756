"""`kvtier images` against an independent walk of what the pinned Helm renders, for every environment.

The oracle walks every rendered document at any depth: each `containers`, `initContainers` and
`ephemeralContainers` list, and HyperPod's InferenceEndpointConfig `spec.worker.image` (the operator
turns it into the worker container). The command runs as users run it (`python -m kvtier.cli`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render

from kvtier import helm, paths
from kvtier.images import reference

CHART = paths.CHARTS / "kv-tiered-inference"
ENVIRONMENTS = sorted(paths.VALUES.glob("*.yaml"))
MIRROR = "mirror.example:5000"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


@pytest.fixture(autouse=True)
def _deps(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)


def walk(node: Any, owner: tuple[str, str] = ("", "")) -> Iterator[tuple[str, str, str, str]]:
    """(image, kind, name, container) of every container list and HyperPod worker anywhere in `node`."""
    if isinstance(node, list):
        for item in node:
            yield from walk(item, owner)
        return
    if not isinstance(node, dict):
        return
    if "kind" in node and "apiVersion" in node:
        owner = (str(node["kind"]), str((node.get("metadata") or {}).get("name")))
        if node["kind"] == "InferenceEndpointConfig":
            yield node["spec"]["worker"]["image"], *owner, "worker"
    for key, value in node.items():
        if key in CONTAINER_LISTS and isinstance(value, list):
            for c in value:
                if isinstance(c, dict) and "image" in c:
                    yield c["image"], *owner, c["name"]
        yield from walk(value, owner)


def rendered_uses(values: list[Path], extra: list[str] = ()) -> set[tuple[str, str, str, str]]:
    done = render(CHART, values=values, release="kvtier", namespace="default", extra=extra)
    assert done.returncode == 0, done.stderr
    return {use for doc in yaml.safe_load_all(done.stdout) if doc for use in walk(doc)}


def kvtier_images(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvtier.cli", "images", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def listed(*args: str | Path) -> list[dict[str, Any]]:
    done = kvtier_images(*args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def uses_of(items: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    return {(i["image"], u["kind"], u["name"], u["container"]) for i in items for u in i["usedBy"]}


@pytest.mark.parametrize("environment", ENVIRONMENTS, ids=lambda p: p.stem)
def test_every_image_the_render_pulls_is_listed_once(environment: Path) -> None:
    expected = rendered_uses([environment])
    assert expected, f"{environment.name} renders no image at all"
    items = listed(environment)
    images = [i["image"] for i in items]
    assert images == sorted(set(images)), "one entry per reference, sorted"
    assert set(images) == {use[0] for use in expected}
    assert uses_of(items) == expected, "usedBy names every object and container that runs the image"
    for i in items:
        pin = f"@{i['digest']}" if i["digest"] else f":{i['tag']}"
        assert i["image"].endswith(pin) and i["repository"] in i["image"], i
    text = kvtier_images(environment)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == images, "the default output is one reference a line"


def test_without_values_files_the_chart_defaults_are_listed() -> None:
    assert {i["image"] for i in listed()} == {use[0] for use in rendered_uses([])}


def test_several_environments_list_the_union() -> None:
    both = ENVIRONMENTS[:2]
    expected = {use[0] for env in both for use in rendered_uses([env])}
    assert {i["image"] for i in listed(*both)} == expected


@pytest.mark.parametrize("environment", ENVIRONMENTS, ids=lambda p: p.stem)
def test_global_image_registry_rewrites_every_image(environment: Path) -> None:
    mirrored = {use[0] for use in rendered_uses([environment], ["--set", f"global.imageRegistry={MIRROR}"])}
    assert mirrored
    outside = sorted(i for i in mirrored if not i.startswith(f"{MIRROR}/"))
    assert not outside, f"images global.imageRegistry does not reach: {outside}"
    items = listed(environment, "--set", f"global.imageRegistry={MIRROR}")
    assert {i["image"] for i in items} == mirrored
    assert {i["registry"] for i in items} == {MIRROR}
    # docs/publishing.md's mirror loop copies each image to $MIRROR/<reference without its registry>:
    # exactly where the release then pulls from.
    plain = kvtier_images(environment)
    assert plain.returncode == 0, plain.stderr
    assert {f"{MIRROR}/{ref.split('/', 1)[1]}" for ref in plain.stdout.split()} == mirrored


def _refused(*args: str | Path) -> str:
    done = kvtier_images(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    return done.stderr


def test_a_missing_values_file_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert str(missing) in _refused(missing)
    assert str(missing) in _refused("-f", missing)


def test_a_values_file_that_is_not_yaml_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("engine:\n  image: [unclosed\n")
    assert str(broken) in _refused(broken)
    assert str(broken) in _refused(ENVIRONMENTS[0], "-f", broken)


def test_values_the_chart_refuses_are_refused_naming_them(tmp_path: Path) -> None:
    assert "no.such.key=1" in _refused("--set", "no.such.key=1")
    untagged = tmp_path / "untagged.yaml"
    untagged.write_text("router:\n  image:\n    tag: null\n")
    assert str(untagged) in _refused(untagged)


# A registry written with a trailing "/" would join to `reg//repo`, an empty path component that
# distribution/reference v0.6.0's grammar (reference.go) and so the kubelet refuse; both charts' image
# helpers drop it. The oracle is the same render with the registry written without the slashes.
REGISTRY_SLIPS = [
    ("kv-tiered-inference", paths.VALUES / "cpu.yaml", "engine.image.registry", "my.reg.io"),
    ("kv-tiered-inference", paths.VALUES / "prod-g6e-4xlarge.yaml", "global.imageRegistry", MIRROR),
    ("curvine", None, "image.registry", "ghcr.io"),
    ("curvine", None, "global.imageRegistry", MIRROR),
]


def _image_uses(chart: str, values: Path | None, key: str, registry: str) -> set[tuple[str, str, str, str]]:
    done = render(chart, values=[values] if values else [], set_values={key: registry})
    assert done.returncode == 0, done.stderr
    return {use for doc in yaml.safe_load_all(done.stdout) if doc for use in walk(doc)}


@pytest.mark.parametrize("slashes", ["/", "//"])
@pytest.mark.parametrize(
    ("chart", "values", "key", "registry"), REGISTRY_SLIPS, ids=[f"{c}-{k}" for c, _, k, _ in REGISTRY_SLIPS]
)
def test_a_registry_with_a_trailing_slash_renders_as_without_it(
    chart: str, values: Path | None, key: str, registry: str, slashes: str
) -> None:
    plain = _image_uses(chart, values, key, registry)
    assert any(use[0].startswith(f"{registry}/") for use in plain), f"{key} reaches no image"
    slipped = _image_uses(chart, values, key, registry + slashes)
    assert slipped == plain
    for image, *_ in slipped:
        reference.parse(image)  # raises on what the kubelet could not parse


@pytest.mark.parametrize(
    ("chart", "tag_line", "pointer"),
    [
        ("kv-tiered-inference", "engine:\n  image:\n    tag: ", "/engine/image/tag"),
        ("kv-tiered-inference", "router:\n  image:\n    tag: ", "/router/image/tag"),
        ("curvine", "image:\n  tag: ", "/image/tag"),
    ],
)
@pytest.mark.parametrize("major", [3, 4])
def test_a_tag_yaml_reads_as_a_number_is_refused_and_a_quoted_one_kept(
    chart: str, tag_line: str, pointer: str, major: int, tmp_path: Path, need
) -> None:
    """`tag: 1.10` is the float 1.1 to YAML, a valid tag of another image; the schema (type string) makes
    Helm refuse it, and the quoted tag renders as written."""
    need(helm_bin(major).exists(), f"pinned Helm {major} not built (make tools)")
    number, quoted = tmp_path / "number.yaml", tmp_path / "quoted.yaml"
    number.write_text(f"{tag_line}1.10\n")
    quoted.write_text(f'{tag_line}"1.10"\n')
    refused = render(chart, values=[number], major=major)
    assert refused.returncode != 0, f"Helm {major} rendered an unquoted 1.10 tag"
    assert "values don't meet the specifications of the schema" in refused.stderr
    assert pointer in refused.stderr and "want string" in refused.stderr, refused.stderr
    kept = render(chart, values=[quoted], major=major)
    assert kept.returncode == 0, kept.stderr
    images = {use[0] for doc in yaml.safe_load_all(kept.stdout) if doc for use in walk(doc)}
    assert any(image.endswith(":1.10") for image in images), images
    assert not any(image.endswith(":1.1") for image in images), images
