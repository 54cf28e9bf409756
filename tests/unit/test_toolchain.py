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


def _go_imports(main_go: str) -> set[str]:
    return set(re.findall(r'^\s*(?:_\s+)?"([^"]+)"', main_go, flags=re.MULTILINE))


def test_the_coredns_build_has_every_plugin_the_corefile_names() -> None:
    """Our CoreDNS main links only some plugins: a directive added to the tier's Corefile without its
    plugin would make CoreDNS refuse the Corefile at start-up, in the real-node tier only."""
    import yaml

    from kvtier.cluster.realnode import config as realconfig

    manifests = list(yaml.safe_load_all(realconfig.coredns_manifests("coredns:test")))
    (corefile,) = [m["data"]["Corefile"] for m in manifests if m.get("kind") == "ConfigMap"]
    # A directive is the first word of a line inside the server block (not a `{`/`}` line, not an
    # option of a plugin block such as `pods insecure`, which sits one level deeper).
    directives = set()
    depth = 0
    for line in corefile.splitlines():
        words = line.split()
        if words and depth == 1 and words[0] != "}":
            directives.add(words[0])
        depth += line.count("{") - line.count("}")
    assert {"kubernetes", "cache"} <= directives, directives
    linked = {
        i.rsplit("/", 1)[1] for i in _go_imports((paths.ROOT / "toolchain/coredns/main.go").read_text())
    }
    assert directives <= linked, (
        f"the Corefile uses plugins toolchain/coredns/main.go does not link: {directives - linked}"
    )


def test_the_registry_build_has_the_storage_and_auth_the_tests_configure() -> None:
    """Our registry main links the filesystem driver and htpasswd auth only: what the loopback
    registry's configuration (tests/harness/registry_server.py) asks for."""
    source = (paths.ROOT / "tests/harness/registry_server.py").read_text()
    linked = _go_imports((paths.ROOT / "toolchain/registry/main.go").read_text())
    for driver in re.findall(r'"storage":\s*\{"(\w+)"', source):
        assert f"github.com/distribution/distribution/v3/registry/storage/driver/{driver}" in linked, driver
    for auth in re.findall(r'config\["auth"\]\s*=\s*\{"(\w+)"', source):
        assert f"github.com/distribution/distribution/v3/registry/auth/{auth}" in linked, auth
