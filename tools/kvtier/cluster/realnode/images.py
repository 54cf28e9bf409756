"""Container images for the real node, built here without any registry and imported into containerd.

Each image is an OCI image layout written as a tar with tarfile/json (uncompressed layers, so a layer's
digest is its diff ID) and cached outside the repository as images/<name>-<key>.tar, where <key> hashes
everything the image is made from; a second run with the same inputs reuses the file, and an archive
built for new inputs replaces the one of the old (the engine's is 7 GB). The image's name is
kvtier.local/<name>:<key>, so a changed recipe is a new tag and an old one is never reused by mistake.

- pause: the sandbox program of toolchain/node/pause, alone in the image.
- coredns: the CoreDNS binary built from the Go module proxy.
- python: a Debian base (mmdebstrap from the configured Debian mirror) with python3, for the `helm test`
  pods and the eviction job.
- router: the python image plus one layer with vllm-router and its dependencies from PyPI (pip's wheels
  for the base's Python and platform, installed with --target) and a `vllm-router` launcher.
- engine: a Debian base with python3 and the libraries vLLM's CPU build links (libnuma), plus one layer
  with the engine venv's packages (toolchain/engine.sh: vLLM's CPU build, LMCache at the chart's version
  and the two CPU-copy stand-ins, lmcache-cpu-copy and offload-cpu-copy) and a `vllm` launcher. Large
  (the venv is several GB), so it is not one of the images every cluster imports: `engine()` builds it
  and `import_into` adds it to a running cluster when a test needs it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import kvtier
from kvtier.cluster.common import binaries
from kvtier.cluster.realnode import nodebins
from kvtier.errors import UserError
from kvtier.toolchain import versions

REGISTRY = "kvtier.local"
SOURCES_DIR = Path("/etc/apt/sources.list.d")
DEBIAN_SUITE = "bookworm"
# python3 brings http, json, urllib (kvcheck.py and l2_evict.py use the standard library only).
DEBIAN_PACKAGES = ["python3", "ca-certificates"]
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Image:
    name: str
    key: str  # hash of the inputs
    archive: Path  # the cached OCI layout tar

    @property
    def ref(self) -> str:
        return f"{REGISTRY}/{self.name}:{self.key}"


def chart_image_values(ref: str) -> dict[str, str]:
    """A chart's `image` keys (registry, repository, tag) for the local image `ref`, never pulled."""
    registry, rest = ref.split("/", 1)
    repository, tag = rest.rsplit(":", 1)
    return {"registry": registry, "repository": repository, "tag": tag, "pullPolicy": "Never"}


def cache_dir() -> Path:
    return binaries.cache_dir() / "images"


def inputs_key(*parts: object) -> str:
    """An image's key: 12 hex digits of a hash of everything it is built from (its tag, its cache name)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def file_digest(path: Path) -> str:
    """A file's SHA-256, hex, read in 1 MiB pieces (layers and binaries are hundreds of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def single_binary_layer(binary: Path, inside: str) -> bytes:
    """An uncompressed layer holding one static program at /<inside> (fixed owner and time: reproducible)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        info = tarfile.TarInfo(inside)
        info.size, info.mode, info.mtime = binary.stat().st_size, 0o755, 0
        with binary.open("rb") as stream:
            layer.addfile(info, stream)
    return buffer.getvalue()


def write_layout(out: Path, ref: str, layers: list[Path], config: dict[str, object]) -> None:
    """Write an OCI image layout tar for `ref`; each layer is an uncompressed tar file."""
    diff_ids = [f"sha256:{file_digest(layer)}" for layer in layers]
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    config_blob = json.dumps(image_config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": _descriptor(MEDIA_CONFIG, config_blob),
        "layers": [
            {"mediaType": MEDIA_LAYER, "digest": digest, "size": layer.stat().st_size}
            for digest, layer in zip(diff_ids, layers, strict=True)
        ],
    }
    manifest_blob = json.dumps(manifest, sort_keys=True).encode()
    # containerd names the imported image after io.containerd.image.name; the OCI ref name is the tag.
    annotations = {
        "io.containerd.image.name": ref,
        "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1],
    }
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                **_descriptor(MEDIA_MANIFEST, manifest_blob),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": annotations,
            }
        ],
    }
    partial = out.with_suffix(".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as archive:
        _add_bytes(archive, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        for digest, layer in zip(diff_ids, layers, strict=True):
            archive.add(layer, arcname=f"blobs/sha256/{digest.split(':')[1]}")
        for blob in (config_blob, manifest_blob):
            _add_bytes(archive, f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}", blob)
        _add_bytes(archive, "index.json", json.dumps(index, sort_keys=True).encode())
    partial.rename(out)
    _remove_superseded(out)


def _remove_superseded(archive: Path) -> None:
    """Delete the cached archives of earlier recipes of the same image: one key per name is kept, so each
    rebuild of the several-GB engine image does not leave the last one behind on the disk."""
    name = archive.name.rsplit("-", 1)[0]
    for other in archive.parent.glob(f"{name}-*.tar"):
        if other != archive and re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{12}}\.tar", other.name):
            other.unlink(missing_ok=True)


def _descriptor(media_type: str, blob: bytes) -> dict[str, object]:
    return {
        "mediaType": media_type,
        "digest": f"sha256:{hashlib.sha256(blob).hexdigest()}",
        "size": len(blob),
    }


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    archive.addfile(info, io.BytesIO(data))


def _single_binary_image(name: str, binary: Path, config: dict[str, object]) -> Image:
    key = inputs_key(name, file_digest(binary), config)
    image = Image(name, key, cache_dir() / f"{name}-{key}.tar")
    if not image.archive.exists():
        cache_dir().mkdir(parents=True, exist_ok=True)
        with scratch_folder() as scratch:
            layer = scratch / "layer.tar"
            layer.write_bytes(single_binary_layer(binary, name))
            write_layout(image.archive, image.ref, [layer], config)
    return image


def pause() -> Image:
    program = nodebins.path("pause")
    return _single_binary_image("pause", program, {"Entrypoint": ["/pause"], "User": "65535:65535"})


def coredns() -> Image:
    program = nodebins.path("coredns")
    return _single_binary_image("coredns", program, {"Entrypoint": ["/coredns"], "Env": [PATH_ENV]})


def debian_mirror() -> str:
    """The Debian mirror apt on this machine uses (KVTIER_DEBIAN_MIRROR overrides it)."""
    if os.environ.get("KVTIER_DEBIAN_MIRROR"):
        return os.environ["KVTIER_DEBIAN_MIRROR"]
    for sources in sorted(SOURCES_DIR.glob("*.sources")) + sorted(SOURCES_DIR.parent.glob("sources.list")):
        for uri in re.findall(r"(?m)^(?:URIs:|deb)\s+(\S+)", sources.read_text(errors="replace")):
            if "debian" in uri and "security" not in uri:
                return uri
    raise UserError(
        f"no Debian mirror found in {SOURCES_DIR}/*.sources or /etc/apt/sources.list: "
        "set KVTIER_DEBIAN_MIRROR=http://... to the mirror for the image's base"
    )


def mmdebstrap_options(packages: list[str] = DEBIAN_PACKAGES) -> list[str]:
    """How a base is made (the image key hashes these, the mirror and the suite)."""
    return [
        "--mode=root",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        # The runtime provides /dev; documentation and caches only make the layer larger.
        "--skip=output/dev",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--customize-hook=rm -rf $1/var/cache/apt/* $1/var/lib/apt/lists/*",
    ]


def python_base(progress: Progress) -> Image:
    """Debian minbase + python3 (mmdebstrap, about a minute once), as the image the test pods run."""
    return debian_base("python", DEBIAN_PACKAGES, progress)


def debian_base(name: str, packages: list[str], progress: Progress) -> Image:
    """Debian minbase + `packages` (mmdebstrap, about a minute once), its command python3."""
    mirror = debian_mirror()
    key = inputs_key(name, DEBIAN_SUITE, mirror, mmdebstrap_options(packages))
    image = Image(name, key, cache_dir() / f"{name}-{key}.tar")
    if image.archive.exists():
        return image
    cache_dir().mkdir(parents=True, exist_ok=True)
    progress(
        f"building the Debian {DEBIAN_SUITE} + {', '.join(packages)} image with mmdebstrap (once; {mirror})"
    )
    with scratch_folder() as scratch:
        rootfs = scratch / "rootfs.tar"
        command = [
            "perl",
            str(nodebins.path("mmdebstrap")),
            *mmdebstrap_options(packages),
            DEBIAN_SUITE,
            str(rootfs),
            f"deb {mirror} {DEBIAN_SUITE} main",
        ]
        env = {**os.environ, **nodebins.environment(), "TMPDIR": str(scratch)}
        proc = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if proc.returncode != 0:
            raise UserError(f"mmdebstrap failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        write_layout(image.archive, image.ref, [rootfs], {"Env": [PATH_ENV], "Cmd": ["python3"]})
    return image


@contextmanager
def scratch_folder() -> Iterator[Path]:
    """A temporary folder next to the cache (same disk, so the final rename is atomic)."""
    with tempfile.TemporaryDirectory(dir=cache_dir()) as folder:
        yield Path(folder)


# The base's interpreter (Debian bookworm: CPython 3.11, glibc 2.36) and where Debian's python3 looks.
BASE_PYTHON = "3.11"
SITE_PACKAGES = f"usr/local/lib/python{BASE_PYTHON}/dist-packages"
WHEEL_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
ROUTER_LAUNCHER = (
    "#!/usr/bin/python3\nimport sys\nfrom vllm_router.launch_router import main\n\nsys.exit(main())\n"
)


def router(progress: Progress) -> Image:
    """vllm-router (the pinned version, PyPI) on the python image; run as `vllm-router` like the chart."""
    base = python_base(progress)
    version = versions()["VLLM_ROUTER_VERSION"]
    pip_options = ["--only-binary=:all:", *(f"--platform={p}" for p in WHEEL_PLATFORMS)]
    pip_options += [f"--python-version={BASE_PYTHON}", "--implementation=cp", "--abi=cp311", "--abi=abi3"]
    pip_options += ["--abi=none"]
    key = inputs_key("router", base.key, version, pip_options, ROUTER_LAUNCHER)
    image = Image("router", key, cache_dir() / f"router-{key}.tar")
    if image.archive.exists():
        return image
    progress(f"building the router image: vllm-router {version} from PyPI on {base.ref} (once)")
    with scratch_folder() as scratch:
        tree = scratch / "tree"
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target"]
        command += [str(tree / SITE_PACKAGES), *pip_options, f"vllm-router=={version}"]
        proc = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise UserError(
                f"pip could not fetch vllm-router {version} for the image:\n{proc.stderr[-3000:]}"
            )
        # pip's scripts name this machine's interpreter; the image gets its own launcher instead.
        shutil.rmtree(tree / SITE_PACKAGES / "bin", ignore_errors=True)
        launcher = tree / "usr" / "local" / "bin" / "vllm-router"
        launcher.parent.mkdir(parents=True)
        launcher.write_text(ROUTER_LAUNCHER)
        launcher.chmod(0o755)
        layer = scratch / "router.tar"
        with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(tree, arcname=".", filter=_owned_by_root)
        base_layer = scratch / "base.tar"
        extract_layer(base.archive, base_layer)
        write_layout(
            image.archive, image.ref, [base_layer, layer], {"Env": [PATH_ENV], "Cmd": ["vllm-router"]}
        )
    return image


# vLLM's CPU build links libnuma (vllm/_C, torch's CPU kernels bring their own OpenMP).
ENGINE_PACKAGES = [*DEBIAN_PACKAGES, "libnuma1"]
ENGINE_LAUNCHER = Path(kvtier.__file__).parent / "engine_rig" / "vllm_cli.py"


def engine(progress: Progress, venv: Path) -> Image:
    """vLLM's CPU build with LMCache and the CPU KV-copy stand-in, copied from the engine venv `venv`
    (its packages are built for CPython 3.11 on glibc, like the Debian base's); run as `vllm` like the
    chart. The key hashes the venv's install stamp and adapter stamp, so a new venv is a new image."""
    base = debian_base("engine-base", ENGINE_PACKAGES, progress)
    stamps = sorted(p.name for p in venv.glob(".installed-*")) + sorted(
        p.name for p in venv.glob(".adapter-*")
    )
    if not any(s.startswith(".installed-") for s in stamps):
        raise UserError(f"{venv} is not a finished engine venv (no .installed-* stamp): run `make engine`")
    launcher = "#!/usr/bin/python3\n" + ENGINE_LAUNCHER.read_text()
    key = inputs_key("engine", base.key, stamps, launcher)
    image = Image("engine", key, cache_dir() / f"engine-{key}.tar")
    if image.archive.exists():
        return image
    (site,) = venv.glob("lib/python3.*/site-packages")
    progress(f"building the engine image from {venv} on {base.ref} (once; several GB, a few minutes)")
    with scratch_folder() as scratch:
        layer = scratch / "engine.tar"
        with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(site, arcname=SITE_PACKAGES, filter=_packaged)
            _add_bytes(tar, "usr/local/bin/vllm", launcher.encode(), mode=0o755)
        base_layer = scratch / "base.tar"
        extract_layer(base.archive, base_layer)
        write_layout(image.archive, image.ref, [base_layer, layer], {"Env": [PATH_ENV], "Cmd": ["vllm"]})
    return image


def _packaged(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """The venv's packages owned by root, keeping their times: the byte-code caches record their source's
    mtime, so they stay valid and a pod (read-only root file system) does not recompile vLLM each start."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    return info


def extract_layer(archive: Path, out: Path) -> None:
    """The (only) layer of a one-layer image archive, as a file."""
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest_digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.load(tar.extractfile(f"blobs/sha256/{manifest_digest}"))  # type: ignore[arg-type]
        (layer,) = manifest["layers"]
        source = tar.extractfile(f"blobs/sha256/{layer['digest'].split(':')[1]}")
        assert source is not None
        with out.open("wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)


def all_images(progress: Progress) -> list[Image]:
    return [pause(), coredns(), python_base(progress), router(progress)]


# Left free after an import: the kubelet evicts pods below 1 % (config.py), and pods write logs and volumes.
IMPORT_SPARE = 4 << 30


def _check_room(where: Path, images: list[Image]) -> None:
    """containerd keeps an imported archive's blobs and unpacks them into a snapshot: about twice its size.
    Refuse before a full disk makes the kubelet evict the pods the import was for."""
    needed = 2 * sum(image.archive.stat().st_size for image in images) + IMPORT_SPARE
    free = shutil.disk_usage(where).free
    if free < needed:
        raise UserError(
            f"importing {', '.join(i.ref for i in images)} needs about {needed / 2**30:.1f} GiB free at "
            f"{where} (each archive twice, blobs and unpacked, and {IMPORT_SPARE >> 30} GiB spare); "
            f"{free / 2**30:.1f} GiB is free. Free space on that disk (old clusters under "
            f"{binaries.state_dir() / 'real-clusters'}, old clones) and run again."
        )


def import_into(socket: Path, images: list[Image], progress: Progress) -> None:
    """Import the archives into containerd's k8s.io namespace (where the kubelet looks for images)."""
    ctr = [str(nodebins.path("ctr")), "--address", str(socket), "--namespace", "k8s.io"]
    env = {**os.environ, **nodebins.environment()}
    _check_room(socket.parent, images)
    for image in images:
        progress(f"importing {image.ref}")
        proc = subprocess.run(
            [*ctr, "images", "import", str(image.archive)],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise UserError(f"`ctr images import {image.archive}` failed:\n{proc.stderr[-2000:]}")
    listed = subprocess.run([*ctr, "images", "ls", "-q"], env=env, capture_output=True, text=True).stdout
    absent = [image.ref for image in images if image.ref not in listed.split()]
    if absent:
        raise UserError(f"containerd does not list the imported images {absent}; it has:\n{listed}")
