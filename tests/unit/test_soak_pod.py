"""The soak's hands on an L2 namespace (kvtier.load.soak_pod), run as a release's engine pod runs them: its
source given to `python3 -c` in an isolated interpreter that has no kvtier, only the standard library and
PyYAML; and the faults each target refuses before a soak starts."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import (
    V1Container,
    V1ContainerPort,
    V1ObjectMeta,
    V1Pod,
    V1PodCondition,
    V1PodSpec,
    V1PodStatus,
)

from kvtier.load import soak, soak_pod, soak_release, soak_rig
from kvtier.smoke import reach

SOURCE = Path(soak_pod.__file__).read_text()


def in_pod(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """soak_pod as ReleaseSubject sends it: `python3 -c <source> ...`, isolated from this checkout."""
    proc = subprocess.run(
        [sys.executable, "-I", "-c", SOURCE, *args], capture_output=True, text=True, env=env or {}, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def namespace(tmp_path: Path, *sizes: int) -> Path:
    directory = tmp_path / "l2" / "tiny-llama.abc"
    directory.mkdir(parents=True)
    for index, size in enumerate(sizes):
        (directory / f"chunk{index}.data").write_bytes(bytes(range(256)) * (size // 256))
    (directory / "chunk9.data.tmp").write_bytes(b"x")  # a writer's temp file: not a chunk
    return directory


def test_the_namespace_is_the_one_the_engines_lmcache_config_names(tmp_path: Path) -> None:
    mount = tmp_path / "l2"
    config = tmp_path / "lmcache.yaml"
    env = {"LMCACHE_CONFIG_FILE": str(config)}
    plugin = {"extra_config": {soak_pod.PLUGIN_BASE_PATH: str(mount / "m.1")}, "remote_url": None}
    config.write_text(yaml.safe_dump(plugin))
    assert in_pod("where", "--mount", str(mount), env=env)["dir"] == str(mount / "m.1")
    config.write_text(yaml.safe_dump({"remote_url": f"fs://localhost:0{mount}/m.2/"}))  # LMCache's own
    assert in_pod("where", "--mount", str(mount), env=env)["dir"] == str(mount / "m.2")
    assert in_pod("where", "--mount", str(mount))["dir"] == str(mount)  # no config: the mount itself


@pytest.mark.parametrize("kind", soak_pod.DAMAGES)
def test_each_damage_hits_one_chunk_written_since_the_point_began(tmp_path: Path, kind: str) -> None:
    directory = namespace(tmp_path, 1024, 1024)
    old = directory / "chunk0.data"
    os.utime(old, ns=(1, 1))  # written before the point: never damaged
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    env = {"LMCACHE_CONFIG_FILE": ""}
    since = str(old.stat().st_mtime_ns + 1)
    done = in_pod("damage", "--mount", str(directory), "--kind", kind, "--since-ns", since, env=env)
    assert done["name"] == "chunk1.data"
    hit = directory / "chunk1.data"
    if kind == "delete-chunks":
        assert not hit.exists()
    elif kind == "truncate-chunks":
        assert hit.read_bytes() == before["chunk1.data"][:512]
    else:
        assert hit.stat().st_size == 1024
        pairs = zip(hit.read_bytes(), before["chunk1.data"], strict=True)
        assert [i for i, (a, b) in enumerate(pairs) if a != b] == list(range(512, 576))
    assert old.read_bytes() == before["chunk0.data"]
    assert in_pod("list", "--mount", str(directory))["names"] == sorted(
        n for n in before if n.endswith(".data") and (directory / n).exists()
    )


def test_nothing_written_since_means_nothing_damaged_unless_the_point_knows_it(tmp_path: Path) -> None:
    directory = namespace(tmp_path, 512, 512)
    assert soak_pod.damage(directory, "change-chunks", 2**62, random.Random(0)) is None
    # A release's reference pass wrote the point's chunks before it began: their names aim the damage.
    done = in_pod(
        "damage", "--mount", str(directory), "--since-ns", str(2**62), "--known", "chunk1.data,gone"
    )
    assert done["name"] == "chunk1.data"
    with pytest.raises(ValueError, match="unknown damage 'melt'"):
        soak_pod.damage(directory, "melt", 0, random.Random(0))


def test_a_namespace_sent_away_comes_back_with_what_was_written_meanwhile(tmp_path: Path) -> None:
    directory = namespace(tmp_path, 512, 512)
    soak_pod.away(directory)
    assert soak_pod.chunk_names(directory) == []  # gone, as the engines see it
    directory.mkdir()  # an engine wrote again meanwhile
    (directory / "fresh.data").write_bytes(b"new")
    soak_pod.back(directory)
    assert soak_pod.chunk_names(directory) == ["chunk0.data", "chunk1.data", "fresh.data"]
    assert not directory.with_name(directory.name + soak_pod.AWAY).exists()


NATIVE_DIR = "tiny_0123456789ab_r0/abc/de_g0"


def native_namespace(tmp_path: Path) -> Path:
    """vLLM's native fs tier's layout: chunk files two levels below the model folder, config.json beside."""
    directory = tmp_path / "l2" / "tiny-llama.def"
    (directory / NATIVE_DIR).mkdir(parents=True)
    (directory / "tiny_0123456789ab_r0/config.json").write_text("{}")
    for name in ("abcde1.bin", "abcde2.bin", "abcde3.bin_77.tmp"):
        (directory / NATIVE_DIR / name).write_bytes(bytes(range(256)) * 4)
    return directory


def test_native_chunks_are_listed_damaged_and_brought_back_by_their_path(tmp_path: Path) -> None:
    directory = native_namespace(tmp_path)
    chunks = [f"{NATIVE_DIR}/abcde1.bin", f"{NATIVE_DIR}/abcde2.bin"]
    assert in_pod("list", "--mount", str(directory))["names"] == chunks  # no temp file, no config.json
    done = in_pod("damage", "--mount", str(directory), "--kind", "change-chunks", "--since-ns", "0")
    assert done["name"] in chunks and (directory / done["name"]).stat().st_size == 1024
    soak_pod.away(directory)
    (directory / NATIVE_DIR).mkdir(parents=True)  # an engine wrote again meanwhile, in the same folders
    (directory / NATIVE_DIR / "abcde9.bin").write_bytes(b"new")
    (directory / NATIVE_DIR / "abcde1.bin").write_bytes(b"rewritten")
    soak_pod.back(directory)
    assert soak_pod.chunk_names(directory) == [*chunks, f"{NATIVE_DIR}/abcde9.bin"]
    assert (directory / NATIVE_DIR / "abcde1.bin").read_bytes() == b"rewritten"  # the newer write kept
    assert (directory / "tiny_0123456789ab_r0/config.json").exists()
    assert not directory.with_name(directory.name + soak_pod.AWAY).exists()


def test_the_native_namespace_is_the_fs_tier_root_of_the_engines_command_line(tmp_path: Path) -> None:
    root = tmp_path / "l2" / "tiny-llama.def"
    sealed = {"type": "KvtierSealedFsTier", "module_path": "l2_native", "root_dir": str(root)}
    transfer = json.dumps(
        {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"secondary_tiers": [sealed]}}
    )
    argv = ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m", "--kv-transfer-config", transfer, ""]
    cmdline = tmp_path / "cmdline"
    cmdline.write_bytes("\0".join(argv).encode())  # /proc/1/cmdline: NUL-separated
    assert soak_pod.namespace_dir(tmp_path / "l2", cmdline) == root
    assert soak_pod.native_root(["vllm", "serve", f"--kv-transfer-config={transfer}"]) == root
    assert soak_pod.native_root(["vllm", "serve", "--kv-transfer-config", "{oops"]) is None
    assert soak_pod.namespace_dir(tmp_path / "l2", tmp_path / "missing") == tmp_path / "l2"


class NotStarted:
    """Enough of a TieredRig for RigSubject's checks: an L2 directory on whatever filesystem tmp is."""

    def __init__(self, l2_dir: Path) -> None:
        self.l2_dir = l2_dir


def test_the_rig_refuses_volume_faults_on_an_l2_that_is_not_a_volume_of_its_own(tmp_path: Path) -> None:
    directory = namespace(tmp_path, 512)
    subject = soak_rig.RigSubject(NotStarted(directory), routers=None)  # type: ignore[arg-type]
    assert "is not a volume of its own" in subject.unsupported("l2-full")
    assert subject.unsupported("change-chunks") == subject.unsupported("l2-gone") == ""
    result = soak.inject("l2-read-only", subject, threading.Event(), soak.Timing(at_s=0.0), seed=0)
    assert "is not a volume of its own" in result.error
    assert not list(tmp_path.rglob(soak_rig.BALLAST))


def release(mount: str | None, by_service: bool) -> soak_release.ReleaseSubject:
    selectors = reach.Selectors.for_release("kv")
    return soak_release.ReleaseSubject(lambda: None, "inference", selectors, mount, by_service)


def test_a_release_refuses_what_a_soak_must_not_do_to_it_and_says_why() -> None:
    forwarded = release("/mnt/l2cache", by_service=False)
    assert "port-forward" in forwarded.unsupported("kill-router")
    assert "--router-url" in forwarded.unsupported("kill-router")
    assert "shared by every release" in forwarded.unsupported("l2-full")
    assert forwarded.unsupported("l2-read-only") and not forwarded.unsupported("kill-engine")
    assert not release("/mnt/l2cache", by_service=True).unsupported("kill-router")
    no_l2 = release(None, by_service=True)
    assert [f for f in soak.FAULTS if not no_l2.unsupported(f)] == ["none", "kill-engine", "kill-router"]


def test_a_release_never_sends_an_empty_argument_which_the_api_servers_exec_drops() -> None:
    subject = release("/mnt/l2cache", by_service=False)
    sent: list[tuple[str, ...]] = []
    subject._pod = lambda *args: sent.append(args) or {"name": None}  # type: ignore[method-assign]
    assert subject.damage("change-chunks", random.Random(0), 0, []) is None
    assert subject.damage("delete-chunks", random.Random(0), 0, ["a.data", "b.data"]) is None
    assert all(word != "" for args in sent for word in args), sent
    assert "--known=" in sent[0] and "--known=a.data,b.data" in sent[1]


def test_the_ballast_takes_every_block_of_a_small_volume(tmp_path: Path, need) -> None:
    volume = tmp_path / "small"
    with soak_rig.l2_volume(volume, size="3m") as unmounted:
        need(not unmounted, unmounted)  # not root: the rig's l2-full reports it the same way
        (volume / "chunk.data").write_bytes(b"x" * 100_000)  # what the engines wrote before
        soak_rig._fill(volume / soak_rig.BALLAST, step=1 << 20)
        assert os.statvfs(volume).f_bavail == 0
        with pytest.raises(OSError, match="No space left"):
            (volume / "next.data").write_bytes(b"y" * 8192)
    assert not os.path.ismount(volume)


def test_a_namespace_is_gone_only_while_none_of_its_files_is_seen_at_its_path(tmp_path: Path) -> None:
    directory = namespace(tmp_path, 512, 512)
    assert not soak_pod.gone(directory)  # not moved yet
    assert in_pod("away", "--mount", str(directory))["gone"] is True  # confirmed by the move's own command
    directory.mkdir()  # an engine wrote again meanwhile: new files, the moved ones still absent
    (directory / "fresh.data").write_bytes(b"new")
    assert in_pod("gone", "--mount", str(directory))["gone"] is True
    (directory / "chunk0.data").write_bytes(b"x")  # one of the moved files is seen again: not away
    assert not soak_pod.gone(directory)


def test_the_rigs_volume_faults_are_entered_only_once_confirmed_in_force(
    tmp_path: Path, need, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = tmp_path / "small"
    with soak_rig.l2_volume(volume, size="3m") as unmounted:
        need(not unmounted, unmounted)  # not root
        directory = volume / "tiny-llama.abc"
        directory.mkdir()
        (directory / "chunk0.data").write_bytes(b"x" * 100_000)
        subject = soak_rig.RigSubject(NotStarted(directory), routers=None)  # type: ignore[arg-type]
        with subject.volume_fault("l2-full"), pytest.raises(OSError, match="No space left"):
            (volume / "next.data").write_bytes(b"y" * 8192)
        with subject.volume_fault("l2-read-only"), pytest.raises(OSError, match="Read-only"):
            (volume / "next.data").write_bytes(b"y")
        with subject.volume_fault("l2-gone"):
            assert soak_pod.chunk_names(directory) == []
        assert soak_pod.chunk_names(directory) == ["chunk0.data"] and not list(volume.glob(".soak-*"))
        # A ballast that leaves room (a machine too slow to fill it in time) is an error, not a window.
        monkeypatch.setattr(soak_rig, "_fill", lambda ballast: None)
        monkeypatch.setattr(soak, "CONFIRM_S", 0.5)
        with (
            pytest.raises(
                soak.RigError, match=r"l2-full not confirmed in force within 0\.5 s: a write still fits"
            ),
            subject.volume_fault("l2-full"),
        ):
            pass
    assert not os.path.ismount(volume)


def engine_pod(name: str) -> V1Pod:
    container = V1Container(name="vllm", ports=[V1ContainerPort(name="http", container_port=8000)])
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(containers=[container]),
        status=V1PodStatus(phase="Running", conditions=[V1PodCondition(type="Ready", status="True")]),
    )


class DeletingApi:
    """The API server's pods as a forced delete goes on a loaded node: the deleted pod is still listed for
    `listed_for` more listings, then its replacement is Ready."""

    def __init__(self, listed_for: int) -> None:
        self.pods = [engine_pod("engine-a"), engine_pod("engine-b")]
        self.listed_for = listed_for
        self.deleted: list[str] = []
        self.lists_after_delete = 0

    def delete_namespaced_pod(self, name: str, namespace: str, grace_period_seconds: int) -> None:
        self.deleted.append(name)

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        if self.deleted:
            self.lists_after_delete += 1
            if self.lists_after_delete > self.listed_for:
                self.pods = [p for p in self.pods if p.metadata.name not in self.deleted]
                self.pods += [] if len(self.pods) == 2 else [engine_pod("engine-c")]
        return type("PodList", (), {"items": list(self.pods)})()


def test_a_release_pod_kill_is_confirmed_once_the_api_no_longer_lists_the_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = DeletingApi(listed_for=3)
    subject = soak_release.ReleaseSubject(
        lambda: api, "inference", reach.Selectors.for_release("kv"), None, True
    )
    confirmed: list[int] = []
    subject.kill_engine(lambda: confirmed.append(api.lists_after_delete))
    assert api.deleted == ["engine-b"] and confirmed == [4]  # not before the listing without it
    monkeypatch.setattr(soak, "CONFIRM_S", 0.5)
    stuck = DeletingApi(listed_for=10**6)
    subject = soak_release.ReleaseSubject(
        lambda: stuck, "inference", reach.Selectors.for_release("kv"), None, True
    )
    with pytest.raises(soak.RigError, match=r"engine-b still listed 0\.5 s after its forced delete"):
        subject.kill_engine(lambda: confirmed.append(-1))
    assert confirmed == [4]
