"""The pinned toolchain: one versions file, and no tool version written anywhere else."""

from __future__ import annotations

import re
import subprocess

from kvtier import paths, toolchain

VERSIONS_FILE = "toolchain/versions.env"
# Files that could pin a tool (scripts, build and tool configuration, code). Docs and chart READMEs
# may cite the version a fact was checked against; that is provenance, not a pin.
PINNING_FILES = re.compile(r"(\.sh|\.py|\.toml|\.cfg|\.ini|\.env|Makefile|\.ci/run|ct\.yaml)$")


def tracked_files() -> list[str]:
    result = subprocess.run(["git", "ls-files"], cwd=paths.ROOT, capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_versions_file_pins_every_tool_the_install_script_builds() -> None:
    pinned = toolchain.versions()
    script = (paths.ROOT / "toolchain" / "install.sh").read_text()
    used = set(re.findall(r"\$\{?([A-Z0-9_]+_VERSION)\b", script))
    assert used, "install.sh reads no *_VERSION variable"
    assert used <= set(pinned), f"install.sh uses versions missing from {VERSIONS_FILE}: {used - set(pinned)}"


def test_no_pinned_version_is_written_outside_the_versions_file() -> None:
    pinned = {key: value for key, value in toolchain.versions().items() if key.endswith("_VERSION")}
    offenders = []
    for name in tracked_files():
        if name == VERSIONS_FILE or not PINNING_FILES.search(name) or not (paths.ROOT / name).is_file():
            continue
        text = (paths.ROOT / name).read_text(errors="ignore")
        for key, version in pinned.items():
            # a version string next to its tool's name, e.g. "helm vX.Y.Z" or "yamllint==X.Y.Z"
            tool = key.removesuffix("_VERSION").split("_")[0].lower()
            pattern = rf"{re.escape(tool)}[^\n]{{0,40}}{re.escape(version)}(?![\d.])"
            if re.search(pattern, text, re.IGNORECASE):
                offenders.append(f"{name}: {key}={version}")
    assert not offenders, "tool versions must live only in toolchain/versions.env:\n" + "\n".join(offenders)


def test_helm_override_must_be_executable(monkeypatch) -> None:
    import pytest

    from kvtier.errors import UserError

    monkeypatch.setenv("KVTIER_HELM", "/nonexistent/helm")
    with pytest.raises(UserError, match="KVTIER_HELM"):
        toolchain.helm(3)


def test_pinned_helm_ignores_the_override_when_asked(monkeypatch, need) -> None:
    monkeypatch.setenv("KVTIER_HELM", "/nonexistent/helm")
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    assert toolchain.helm(3, allow_override=False) == paths.TOOLS_BIN / "helm3"


def test_lmcache_loader_matches_the_engine_images_lmcache() -> None:
    """Rendered LMCache configs are checked with the same LMCache version the engine image runs."""
    import yaml

    values = yaml.safe_load((paths.CHARTS / "kv-tiered-inference" / "values.yaml").read_text())
    image = values["engine"]["image"]
    assert image["repository"].endswith("lmcache/vllm-openai"), image
    assert image["tag"] == "v" + toolchain.versions()["LMCACHE_VERSION"]


def test_router_rig_matches_the_router_image() -> None:
    """The engine rig and chart tests start the same vllm-router release the chart deploys."""
    import yaml

    values = yaml.safe_load((paths.CHARTS / "kv-tiered-inference" / "values.yaml").read_text())
    assert values["router"]["image"]["tag"] == "v" + toolchain.versions()["VLLM_ROUTER_VERSION"]
