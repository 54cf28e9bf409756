"""The Curvine chart's images built here (kvtier.cluster.realnode.curvine_images) against the chart itself.

The oracle is Helm's render of charts/curvine with its defaults: the images it names, the commands, probes,
working directories and absolute paths its containers use. Each image is unpacked (its layers in order)
into a root file system and checked there; its main program is run once in it with chroot, in a network
namespace of its own (loopback only). Needs the binaries (KVTIER_CURVINE_BIN or ../shared beside the
checkout) and mmdebstrap (`make node-tools`), and root.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from kvtier import helm
from kvtier.cluster.realnode import curvine_binaries, curvine_images, nodebins

# Where each image carries each binary (upstream's layout, charts/curvine/README.md's table).
BINARY_PATHS = {
    "curvine": {f"app/curvine/lib/{b}": b for b in ("curvine-server", "curvine-cli", "curvine-fuse")},
    "curvine-csi": {f"opt/curvine/{b}": b for b in ("csi", "curvine-fuse", "curvine-cli")},
    **{name: {name: name} for name in curvine_images.SIDECARS},
}


@pytest.fixture(scope="module")
def built(need) -> dict[str, curvine_images.ChartImage]:
    reason = curvine_binaries.missing()
    need(not reason, reason)
    need(os.geteuid() == 0, "building Debian bases (mmdebstrap --mode=root) and chroot need root")
    need(os.access(nodebins.path("mmdebstrap"), os.X_OK), "mmdebstrap not unpacked: run `make node-tools`")
    return {image.name: image for image in curvine_images.all_images(lambda m: print(f"[images] {m}"))}


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    """Every container of the chart's default render and its test hooks (pvc.enabled: the cross-node one)."""
    overlay = ["--set", "pvc.enabled=true"]
    manifests = (
        helm.Template(curvine_images.CHART, "cv", overlay=overlay, namespace="curvine").render().manifests
    )
    containers = []
    for doc in manifests:
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec") if "template" in spec else spec
        for container in (pod or {}).get("containers", []) + (pod or {}).get("initContainers", []):
            containers.append({**container, "_object": f"{doc['kind']}/{doc['metadata']['name']}"})
    return containers


def _image_config(archive: Path) -> tuple[dict, list[str]]:
    """The image's config and its layer blob names, read from the OCI layout as containerd would."""
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest = json.load(tar.extractfile(f"blobs/sha256/{index['manifests'][0]['digest'][7:]}"))  # type: ignore[arg-type]
        config = json.load(tar.extractfile(f"blobs/sha256/{manifest['config']['digest'][7:]}"))  # type: ignore[arg-type]
        return config["config"], [f"blobs/sha256/{layer['digest'][7:]}" for layer in manifest["layers"]]


@pytest.fixture(scope="module")
def rootfs(built, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """image name -> (its unpacked root file system, its config)."""
    unpacked = {}
    for name, image in built.items():
        root = tmp_path_factory.mktemp(f"rootfs-{name}")
        config, layers = _image_config(image.archive)
        with tarfile.open(image.archive) as outer:
            for blob in layers:
                source = outer.extractfile(blob)
                assert source is not None
                with tarfile.open(fileobj=source, mode="r|") as layer:
                    layer.extractall(root, filter="fully_trusted")
        unpacked[name] = (root, config)
    return unpacked


def test_images_are_exactly_the_ones_the_chart_renders(built, rendered) -> None:
    used = {container["image"] for container in rendered}
    assert used == {image.ref for image in built.values()}
    policies = {container["imagePullPolicy"] for container in rendered}
    assert policies <= {"IfNotPresent", "Never"}, "a pod would try to pull"


def _inside(root: Path, path: str, image_root: Path) -> Path:
    """`path` inside the image, following absolute symlinks within the image (Debian's /bin -> usr/bin)."""
    current = root
    for part in Path(path).relative_to("/").parts:
        current = current / part
        while current.is_symlink():
            target = os.readlink(current)
            current = image_root / target.lstrip("/") if target.startswith("/") else current.parent / target
    return current


def test_commands_working_dirs_and_paths_of_every_container_exist_in_its_image(
    rendered, built, rootfs
) -> None:
    by_ref = {image.ref: name for name, image in built.items()}
    checked = 0
    for container in rendered:
        root, config = rootfs[by_ref[container["image"]]]
        where = f"{container['_object']} container {container['name']} ({container['image']})"
        command = container.get("command") or config.get("Entrypoint") or config.get("Cmd")
        assert command, f"{where}: neither the chart nor the image names a program"
        program = _inside(root, command[0], root)
        assert program.is_file() and os.access(program, os.X_OK), f"{where}: {command[0]} is not in the image"
        working_dir = container.get("workingDir") or config.get("WorkingDir") or "/"
        assert _inside(root, working_dir, root).is_dir(), f"{where}: working directory {working_dir} missing"
        probe_commands = [
            handler["exec"]["command"]
            for handler in [
                container.get("livenessProbe", {}),
                container.get("readinessProbe", {}),
                *container.get("lifecycle", {}).values(),
            ]
            if "exec" in handler
        ]
        for probe in probe_commands:
            assert _inside(root, probe[0], root).is_file(), f"{where}: {probe[0]} (probe or hook) missing"
        # Absolute Curvine paths the command line names, except those under the container's own mounts.
        mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
        text = " ".join(command + container.get("args", []))
        for path in re.findall(r"(/(?:app|opt)/curvine[\w./-]*)", text):
            if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts):
                assert _inside(root, path, root).exists(), f"{where}: {path} (named in its command) missing"
        checked += 1
    assert checked == len(rendered) > 0


def test_binaries_in_the_images_are_byte_identical_to_the_verified_ones(rootfs) -> None:
    pinned = curvine_binaries.pinned()  # the repository's pin, not a SHA256SUMS beside the archives
    for name, placed in BINARY_PATHS.items():
        root, _ = rootfs[name]
        for inside, binary in placed.items():
            digest = subprocess.run(
                ["sha256sum", str(root / inside)], capture_output=True, text=True, check=True
            )
            assert digest.stdout.split()[0] == pinned[binary], f"{name}: /{inside} differs from {binary}"


def _run_in(root: Path, config: dict, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`argv` inside the unpacked image as root, in its working directory and environment, in a network
    namespace of its own (only loopback exists there)."""
    env = dict(item.split("=", 1) for item in config.get("Env", []))
    cwd = config.get("WorkingDir") or "/"
    command = ["unshare", "--net", "chroot", str(root)]
    if (root / "bin" / "sh").exists():
        command += ["/bin/sh", "-c", f'cd "{cwd}" && exec "$@"', "sh"]
    return subprocess.run([*command, *argv], env=env, capture_output=True, text=True, timeout=60)


def test_each_image_main_program_runs_in_its_image(rootfs) -> None:
    """--version (livenessprobe has none: --help) of each binary, run from the image's own root file system:
    proves the base carries every library the binary links."""
    expected_version = {
        ref.rsplit("/", 1)[1].split(":")[0]: ref.rsplit(":", 1)[1]
        for ref in curvine_images.chart_references().values()
    }
    for name, placed in BINARY_PATHS.items():
        root, config = rootfs[name]
        for inside, binary in placed.items():
            flag = "--help" if binary == "livenessprobe" else "--version"
            proc = _run_in(root, config, [f"/{inside}", flag])
            assert proc.returncode == 0, (
                f"{name}: /{inside} {flag} failed ({proc.returncode}): {proc.stderr[-800:]}"
            )
            if binary in curvine_images.SIDECARS and binary != "livenessprobe":
                assert expected_version[binary] in proc.stdout + proc.stderr


def test_server_entrypoint_runs_what_it_is_given_and_refuses_stop(rootfs) -> None:
    root, config = rootfs["curvine"]
    passthrough = _run_in(root, config, [*config["Entrypoint"], "cv", "--version"])
    assert passthrough.returncode == 0, passthrough.stderr
    assert passthrough.stdout.startswith("curvine-cli ")
    stop = _run_in(root, config, [*config["Entrypoint"], "worker", "stop"])
    assert stop.returncode == 2
    assert "only 'worker start' runs in a container" in stop.stderr
