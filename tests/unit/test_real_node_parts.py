"""The real-node flavour's pure parts: OCI layouts, configs, sysctl restore, mirror discovery, CLI errors.

The flavour itself runs in tests/node; these check what can be checked without root or a kernel."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import images, machine, netns
from kvtier.cluster.realnode import start as realstart
from kvtier.errors import UserError


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_oci_layout_is_self_consistent_and_names_the_image(tmp_path: Path) -> None:
    program = tmp_path / "prog"
    program.write_bytes(b"\x7fELF not really")
    layer = tmp_path / "layer.tar"
    layer.write_bytes(images.single_binary_layer(program, "prog"))
    out = tmp_path / "image.tar"
    images.write_layout(out, "kvtier.local/prog:abc", [layer], {"Entrypoint": ["/prog"]})
    blobs = _members(out)
    assert json.loads(blobs["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (descriptor,) = json.loads(blobs["index.json"])["manifests"]
    assert descriptor["annotations"]["io.containerd.image.name"] == "kvtier.local/prog:abc"
    assert descriptor["annotations"]["org.opencontainers.image.ref.name"] == "abc"

    def blob(d: dict) -> bytes:
        data = blobs[f"blobs/sha256/{d['digest'].split(':')[1]}"]
        assert hashlib.sha256(data).hexdigest() == d["digest"].split(":")[1]
        assert len(data) == d["size"]
        return data

    manifest = json.loads(blob(descriptor))
    config = json.loads(blob(manifest["config"]))
    (layer_descriptor,) = manifest["layers"]
    assert config["rootfs"]["diff_ids"] == [layer_descriptor["digest"]]  # uncompressed: digest = diff ID
    assert config["config"]["Entrypoint"] == ["/prog"]
    with tarfile.open(fileobj=io.BytesIO(blob(layer_descriptor))) as inner:
        (entry,) = inner.getmembers()
    assert (entry.name, entry.mode, entry.mtime) == ("prog", 0o755, 0)
    assert not out.with_suffix(".partial").exists()


def test_layers_are_reproducible(tmp_path: Path) -> None:
    program = tmp_path / "prog"
    program.write_bytes(b"same bytes")
    assert images.single_binary_layer(program, "prog") == images.single_binary_layer(program, "prog")


def test_a_rebuilt_image_replaces_only_its_own_earlier_archives(tmp_path: Path) -> None:
    program, layer = tmp_path / "prog", tmp_path / "layer.tar"
    program.write_bytes(b"x")
    layer.write_bytes(images.single_binary_layer(program, "prog"))
    cache = tmp_path / "images"
    cache.mkdir()
    kept = ["engine-base-0123456789ab.tar", "router-0123456789ab.tar", "engine-notes.tar", "engine-abc.tar"]
    for name in [*kept, "engine-0123456789ab.tar", "engine-fedcba987654.tar"]:
        (cache / name).write_bytes(b"old")
    out = cache / "engine-aaaaaaaaaaaa.tar"
    images.write_layout(out, "kvtier.local/engine:aaaaaaaaaaaa", [layer], {})
    assert sorted(p.name for p in cache.iterdir()) == sorted([*kept, out.name])


def test_an_import_without_room_for_blobs_and_snapshot_is_refused_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "engine-aaaaaaaaaaaa.tar"
    archive.write_bytes(b"x" * 1000)
    image = images.Image("engine", "aaaaaaaaaaaa", archive)
    free = images.IMPORT_SPARE + 2000  # exactly blobs + snapshot + spare: enough
    usage = type("Usage", (), {"free": free, "total": 10 * free, "used": 0})
    monkeypatch.setattr(images.shutil, "disk_usage", lambda _: usage)
    images._check_room(tmp_path, [image])
    usage.free = free - 1
    with pytest.raises(UserError, match=r"needs about .* GiB free at .*; .* GiB is free"):
        images._check_room(tmp_path, [image])


def test_config_files_carry_the_facts_this_machine_needs(tmp_path: Path) -> None:
    layout = realconfig.Layout(tmp_path)
    containerd = tomllib.loads(
        realconfig.containerd(layout, Path("/x/runc"), Path("/x/cni"), "kvtier.local/pause:1")
    )
    cri = containerd["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "kvtier.local/pause:1"
    assert cri["containerd"]["runtimes"]["runc"]["options"] == {
        "BinaryName": "/x/runc",
        "SystemdCgroup": False,
    }
    assert containerd["grpc"]["address"] == str(layout.containerd_socket)
    kubelet = yaml.safe_load(realconfig.kubelet(layout, "/a/b"))
    assert (kubelet["failCgroupV1"], kubelet["cgroupDriver"], kubelet["cgroupRoot"]) == (
        False,
        "cgroupfs",
        "/a/b",
    )
    assert kubelet["address"] == netns.NODE_IP and kubelet["clusterDNS"] == [netns.DNS_SERVICE_IP]
    proxy = yaml.safe_load(realconfig.kube_proxy(layout))
    assert proxy["conntrack"]["maxPerCore"] == 0  # the machine-wide conntrack table is left alone
    cni = json.loads(realconfig.cni(layout))
    assert cni["plugins"][0]["ipMasq"] is False
    assert cni["plugins"][0]["ipam"]["ranges"] == [[{"subnet": netns.POD_CIDR}]]
    dns = list(yaml.safe_load_all(realconfig.coredns_manifests("kvtier.local/coredns:1")))
    service = next(o for o in dns if o["kind"] == "Service")
    assert service["spec"]["clusterIP"] == netns.DNS_SERVICE_IP
    corefile = next(o for o in dns if o["kind"] == "ConfigMap")["data"]["Corefile"]
    assert "forward" not in corefile  # no upstream resolver: nothing leaves the namespace


def test_restore_writes_back_only_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "PROC_SYS", tmp_path)
    for key, value in (("vm/overcommit_memory", "0"), ("kernel/panic", "0")):
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_text(value + "\n")
    monkeypatch.setattr(machine, "CLUSTER_SYSCTLS", ["vm/overcommit_memory", "kernel/panic", "kernel/absent"])
    record = tmp_path / "before.json"
    machine.record(record)
    (tmp_path / "vm/overcommit_memory").write_text("1\n")  # what the kubelet does
    assert machine.restore(record) == ["vm.overcommit_memory"]
    assert (tmp_path / "vm/overcommit_memory").read_text() == "0\n"
    assert machine.restore(record) == []


def test_down_leaves_the_pipe_size_other_clusters_fuse_clients_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fs.pipe-max-size is machine-wide: a cluster's `down` must not put back the value it saw at `up`
    while another cluster's Curvine still needs the raised one (realnode.pipe_limit owns it)."""
    monkeypatch.setattr(machine, "PROC_SYS", tmp_path)
    for key in [*machine.CLUSTER_SYSCTLS, "fs/pipe-max-size"]:
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_text("1048576\n" if key == "fs/pipe-max-size" else "0\n")
    record = tmp_path / "before.json"
    machine.record(record)
    (tmp_path / "fs/pipe-max-size").write_text("2097152\n")
    assert machine.restore(record) == []
    assert (tmp_path / "fs/pipe-max-size").read_text() == "2097152\n"


def test_debian_mirror_comes_from_the_apt_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVTIER_DEBIAN_MIRROR", raising=False)
    sources = tmp_path / "sources.list.d"
    sources.mkdir()
    (sources / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
    )
    monkeypatch.setattr(images, "SOURCES_DIR", sources)
    assert images.debian_mirror() == "http://mirror.example/debian"
    (sources / "debian.sources").unlink()
    with pytest.raises(UserError, match="KVTIER_DEBIAN_MIRROR"):
        images.debian_mirror()


def test_exec_without_a_real_cluster_is_a_clear_error() -> None:
    command = [
        sys.executable,
        "-m",
        "kvtier.cli",
        "cluster",
        "exec",
        "--name",
        "no-such-real-cluster",
        "--",
        "true",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "no real-node cluster 'no-such-real-cluster'" in result.stderr
    assert "Traceback" not in result.stderr


def test_cluster_actions_take_their_own_options() -> None:
    base = [sys.executable, "-m", "kvtier.cli", "cluster"]
    bogus = subprocess.run([*base, "up", "--runtime", "bogus"], capture_output=True, text=True, timeout=60)
    assert bogus.returncode == 2 and "invalid choice: 'bogus'" in bogus.stderr
    stray = subprocess.run([*base, "down", "--runtime", "real"], capture_output=True, text=True, timeout=60)
    assert stray.returncode == 2 and "unrecognized arguments: --runtime" in stray.stderr
    gone = subprocess.run(
        [*base, "down", "--name", "never-started-here"], capture_output=True, text=True, timeout=60
    )
    assert gone.returncode == 0 and "does not exist" in gone.stdout


def test_start_up_starts_every_component_once_in_the_table_order(tmp_path: Path) -> None:
    """The start-up stages and the table of command lines name the same daemons: one missing from the
    stages would never start, one missing from the table would fail start-up with a KeyError."""
    tools = dict.fromkeys(
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "containerd",
            "kubelet",
            "kube-proxy",
        ],
        tmp_path / "bin",
    )
    table = realstart.command_lines(realconfig.layout("unit"), tools)
    started = [c for stage in (realstart.CONTROL_PLANE, realstart.CONTROLLERS, realstart.CONTAINERD,
                               realstart.NODE) for c in stage.starts]  # fmt: skip
    assert started == list(table)
    for component, argv in table.items():
        flags = [a.split("=")[0] for a in argv if a.startswith("--")]
        assert len(flags) == len(set(flags)), f"{component} repeats a flag: {argv}"
