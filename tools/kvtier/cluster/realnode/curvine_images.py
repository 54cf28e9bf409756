"""The Curvine chart's images, built from verified binaries (curvine_binaries) with the real node's image
builder (images), under exactly the references the chart renders by default, so that its pods find them
in the node's containerd with their own `imagePullPolicy: IfNotPresent` and nothing is pulled.

Layouts follow upstream's Dockerfiles at tag v0.4.1 of CurvineIO/curvine (facts, no code copied):

- server `ghcr.io/curvineio/curvine` (`curvine-docker/deploy/Dockerfile_rocky9`): `/app/curvine/lib/`
  holds curvine-server, curvine-cli and curvine-fuse, `/app/curvine/bin/cv` launches curvine-cli,
  `/app/curvine/conf/` is empty (the chart mounts its ConfigMap there), `/app/curvine/logs` and
  `/opt/curvine/data` exist; env `APP_HOME`, `CURVINE_HOME`, `CURVINE_CONF_FILE`,
  `ORPC_BIND_HOSTNAME=0.0.0.0`, `$CURVINE_HOME/bin` on PATH; `WORKDIR /app`; `ENTRYPOINT /entrypoint.sh`,
  `CMD master start`. The entrypoint is our own: `master start` / `worker start` exec the server (PID 1,
  so SIGTERM reaches it), anything else is exec'd as given. Base: Debian with the server's libraries
  (libstdc++6, libssl3, zlib1g) instead of Rocky Linux, plus curl and procps for the chart's test pods.
- CSI `ghcr.io/curvineio/curvine-csi` (`curvine-csi/Dockerfile`): `/opt/curvine/{csi,curvine-fuse,
  curvine-cli}`, `/opt/curvine/conf/` (empty here; the chart mounts its ConfigMap), env
  `CURVINE_HOME=/opt/curvine` and it on PATH, `WORKDIR /opt/curvine`, no entrypoint of its own (the
  chart sets the command). Base: Debian with fuse3 (as upstream's), mount and procps (the plugin runs
  mount, umount, mountpoint, findmnt, sh and ps).
- sidecars `registry.k8s.io/sig-storage/{csi-provisioner,csi-node-driver-registrar,livenessprobe}`: the
  static binary at the image root as the entrypoint, alone in the image (upstream: a distroless static base).
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvtier import curvine_report, paths
from kvtier.cluster.realnode import curvine_binaries, images
from kvtier.errors import UserError

CHART = paths.CHARTS / "curvine"
SERVER_HOME = curvine_report.SERVER_HOME
CSI_HOME = "/opt/curvine"
SERVER_PACKAGES = ["libstdc++6", "libssl3", "zlib1g", "ca-certificates", "curl", "procps"]
CSI_PACKAGES = ["fuse3", "mount", "procps", "ca-certificates"]
SIDECARS = ("csi-provisioner", "csi-node-driver-registrar", "livenessprobe")

# Ours, not upstream's: no background pipeline, the server replaces the shell.
ENTRYPOINT = """#!/bin/sh
# Curvine server image (kvtier): `master start` or `worker start` runs curvine-server as this process
# (exec), so SIGTERM reaches it; any other command line runs as given.
set -eu
home="${CURVINE_HOME:-/app/curvine}"
case "${1:-master}" in
  master|worker)
    if [ "${2:-start}" != start ]; then
      echo "entrypoint: only '$1 start' runs in a container (got '${2}'); stop the container instead" >&2
      exit 2
    fi
    cd "$home"
    conf="${CURVINE_CONF_FILE:-$home/conf/curvine-cluster.toml}"
    exec "$home/lib/curvine-server" --service "$1" --conf "$conf"
    ;;
  *)
    exec "$@"
    ;;
esac
"""
CV_LAUNCHER = """#!/bin/sh
# `cv`: curvine-cli of this image.
exec "${CURVINE_HOME:-/app/curvine}/lib/curvine-cli" "$@"
"""


@dataclass(frozen=True)
class ChartImage(images.Image):
    """An image named as the chart names it (not kvtier.local/<name>:<key>); `key` still names the cache."""

    reference: str

    @property
    def ref(self) -> str:
        return self.reference


def chart_references() -> dict[str, str]:
    """image name -> the reference charts/curvine renders by default (an empty tag: v<appVersion>)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def reference(where: str, image: dict[str, str]) -> str:
        if image.get("digest"):
            raise UserError(
                f"{CHART / 'values.yaml'}: {where}.digest is set; a built image has no fixed digest"
            )
        return f"{image['registry']}/{image['repository']}:{image['tag'] or 'v' + chart['appVersion']}"

    sidecars = values["csi"]["sidecars"]
    return {
        "curvine": reference("image", values["image"]),
        "curvine-csi": reference("csi.image", values["csi"]["image"]),
        "csi-provisioner": reference("csi.sidecars.provisioner", sidecars["provisioner"]),
        "csi-node-driver-registrar": reference("csi.sidecars.registrar", sidecars["registrar"]),
        "livenessprobe": reference("csi.sidecars.livenessProbe", sidecars["livenessProbe"]),
    }


@dataclass(frozen=True)
class _Entry:
    """One path of a layer: a folder (source and text None), a copied file or a written text."""

    path: str
    source: Path | None = None
    text: str | None = None
    mode: int = 0o755


def _write_layer(out: Path, entries: list[_Entry]) -> None:
    """An uncompressed layer with every entry owned by root at time 0 (reproducible)."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as layer:
        for entry in entries:
            info = tarfile.TarInfo(entry.path)
            info.mode, info.mtime = entry.mode, 0
            if entry.source is None and entry.text is None:
                info.type = tarfile.DIRTYPE
                layer.addfile(info)
            elif entry.source is not None:
                info.size = entry.source.stat().st_size
                with entry.source.open("rb") as stream:
                    layer.addfile(info, stream)
            else:
                data = (entry.text or "").encode()
                info.size = len(data)
                layer.addfile(info, io.BytesIO(data))


def _folders(*paths_: str) -> list[_Entry]:
    """Folder entries for each path and its parents, parents first, each once."""
    seen: list[str] = []
    for path in paths_:
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder not in seen:
                seen.append(folder)
    return [_Entry(folder) for folder in seen]


def _on_debian_base(
    name: str,
    reference: str,
    packages: list[str],
    entries: list[_Entry],
    config: dict[str, object],
    digests: dict[str, str],
    progress: images.Progress,
) -> ChartImage:
    """Debian base (`packages`) + one layer of `entries`; the key hashes the base, binaries and recipe."""
    base = images.debian_base(f"{name}-base", packages, progress)
    recipe = [(e.path, e.source.name if e.source else None, e.text, e.mode) for e in entries]
    key = images.inputs_key(name, reference, base.key, digests, recipe, config)
    image = ChartImage(name, key, images.cache_dir() / f"{name}-{key}.tar", reference)
    if image.archive.exists():
        return image
    progress(f"building {reference} from the verified binaries on {base.ref}")
    with images.scratch_folder() as scratch:
        layer, base_layer = scratch / "layer.tar", scratch / "base.tar"
        _write_layer(layer, entries)
        images.extract_layer(base.archive, base_layer)
        images.write_layout(image.archive, image.ref, [base_layer, layer], config)
    return image


def server(bins: curvine_binaries.Verified, progress: images.Progress) -> ChartImage:
    home = SERVER_HOME.strip("/")
    programs = ("curvine-server", "curvine-cli", "curvine-fuse")
    entries = _folders(f"{home}/bin", f"{home}/lib", f"{home}/conf", f"{home}/logs", "opt/curvine/data")
    entries += [_Entry(f"{home}/lib/{program}", source=bins.paths[program]) for program in programs]
    entries += [_Entry(f"{home}/bin/cv", text=CV_LAUNCHER), _Entry("entrypoint.sh", text=ENTRYPOINT)]
    config: dict[str, object] = {
        "Env": [
            f"{images.PATH_ENV}:{SERVER_HOME}/bin",
            "APP_HOME=/app",
            f"CURVINE_HOME={SERVER_HOME}",
            "ORPC_BIND_HOSTNAME=0.0.0.0",
            f"CURVINE_CONF_FILE={SERVER_HOME}/conf/curvine-cluster.toml",
        ],
        "WorkingDir": "/app",
        "Entrypoint": ["/entrypoint.sh"],
        "Cmd": ["master", "start"],
    }
    digests = {program: bins.sha256[program] for program in programs}
    reference = chart_references()["curvine"]
    return _on_debian_base("curvine", reference, SERVER_PACKAGES, entries, config, digests, progress)


def csi(bins: curvine_binaries.Verified, progress: images.Progress) -> ChartImage:
    home = CSI_HOME.strip("/")
    programs = ("csi", "curvine-fuse", "curvine-cli")
    entries = _folders(f"{home}/conf")
    entries += [_Entry(f"{home}/{program}", source=bins.paths[program]) for program in programs]
    config: dict[str, object] = {
        "Env": [f"{images.PATH_ENV}:{CSI_HOME}", f"CURVINE_HOME={CSI_HOME}"],
        "WorkingDir": CSI_HOME,
    }
    digests = {program: bins.sha256[program] for program in programs}
    reference = chart_references()["curvine-csi"]
    return _on_debian_base("curvine-csi", reference, CSI_PACKAGES, entries, config, digests, progress)


def sidecar(name: str, bins: curvine_binaries.Verified) -> ChartImage:
    """One static sidecar at the image root, its entrypoint (like upstream's distroless images)."""
    reference = chart_references()[name]
    config: dict[str, object] = {"Entrypoint": [f"/{name}"], "Env": [images.PATH_ENV]}
    key = images.inputs_key(name, reference, bins.sha256[name], config)
    image = ChartImage(name, key, images.cache_dir() / f"{name}-{key}.tar", reference)
    if not image.archive.exists():
        images.cache_dir().mkdir(parents=True, exist_ok=True)
        with images.scratch_folder() as scratch:
            layer = scratch / "layer.tar"
            layer.write_bytes(images.single_binary_layer(bins.paths[name], name))
            images.write_layout(image.archive, image.ref, [layer], config)
    return image


def all_images(progress: images.Progress) -> list[ChartImage]:
    """Every image the chart's pods run, from the verified binaries (a UserError when they are absent)."""
    bins = curvine_binaries.verified()
    return [server(bins, progress), csi(bins, progress), *(sidecar(name, bins) for name in SIDECARS)]
