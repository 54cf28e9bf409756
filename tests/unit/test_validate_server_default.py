"""When `kvtier validate` has an API server without being asked, and when the local control plane it
started is stopped (the idle watcher's rule), on a cache folder of the test's own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kvtier.cluster.common import binaries
from kvtier.cluster.kwok import idle, lifecycle, sharing
from kvtier.cluster.realnode import config as realnode_config
from kvtier.errors import UserError
from kvtier.validate.layers import live_judges, server
from kvtier.validate.options import CLUSTER_ENV, IDLE_ENV, Options

NAME = "kvtier-validate"


def test_without_the_binaries_the_row_says_what_to_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "running", lambda name=lifecycle.DEFAULT_NAME: False)
    monkeypatch.setattr(binaries, "missing", lambda: ["kube-apiserver", "etcd"])
    why = server.unavailable(None)
    assert "make cluster-tools" in why and "kube-apiserver, etcd" in why, why
    assert server.unavailable("prod") == "", "with --context, the context's API server judges"
    monkeypatch.setattr(binaries, "missing", lambda: [])
    assert server.unavailable(None) == "", "built binaries: a local control plane is started"


@pytest.mark.parametrize(("raw", "seconds"), [("900", 900.0), ("0", 0.0), ("2.5", 2.5), ("-4", 0.0)])
def test_idle_seconds_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float) -> None:
    monkeypatch.setenv(IDLE_ENV, raw)
    assert server.idle_seconds() == seconds


def test_an_idle_value_that_is_no_number_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IDLE_ENV, "15m")
    with pytest.raises(UserError, match=f"{IDLE_ENV}='15m': expected a number of seconds"):
        server.idle_seconds()


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(binaries.STATE_ENV, str(tmp_path))
    sharing.users_dir(NAME).mkdir(parents=True)
    return tmp_path


def _used(at: float) -> None:
    marker = sharing.users_dir(NAME) / sharing.LAST_USED
    marker.touch()
    os.utime(marker, (at, at))


def test_stopped_only_after_idle_seconds_without_a_user(cache: Path) -> None:
    _used(1_000.0)
    assert not idle.should_stop(NAME, 60, now=1_059.0)
    assert idle.should_stop(NAME, 60, now=1_060.0)


def test_a_registered_live_user_keeps_it_up_however_long_ago_the_last_left(cache: Path) -> None:
    _used(0.0)
    (sharing.users_dir(NAME) / str(os.getpid())).touch()  # this process is alive
    assert sharing.live_users(NAME) == [os.getpid()]
    assert not idle.should_stop(NAME, 60, now=10_000.0)


def test_a_user_that_died_does_not_keep_it_up(cache: Path) -> None:
    _used(0.0)
    (sharing.users_dir(NAME) / "999999999").touch()  # above pid_max: no such process
    assert sharing.live_users(NAME) == []
    assert idle.should_stop(NAME, 60, now=10_000.0)


def test_a_cluster_started_by_hand_is_never_stopped(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    downs: list[str] = []
    monkeypatch.setattr(lifecycle, "down", lambda name, progress=None: downs.append(name) or True)
    sharing.stop_if_ours(NAME)
    assert downs == []
    (sharing.users_dir(NAME) / sharing.STARTED_BY_TESTS).touch()
    sharing.stop_if_ours(NAME)
    assert downs == [NAME]
    assert not (sharing.users_dir(NAME) / sharing.STARTED_BY_TESTS).exists()


def test_a_control_plane_that_cannot_start_is_said_by_default_and_an_error_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @contextmanager
    def refuses(*args: object, **kwargs: object) -> Iterator[None]:
        raise UserError("kube-apiserver did not become ready in 300 s")
        yield

    monkeypatch.setattr(server, "unavailable", lambda context: "")
    monkeypatch.setattr(server, "connect", refuses)
    with live_judges.server_judge(Options(server=None), None) as judge:
        assert judge == "no API server could be had: kube-apiserver did not become ready in 300 s"
    with (
        pytest.raises(UserError, match="did not become ready"),
        live_judges.server_judge(Options(server=True), None),
    ):
        pass


def test_the_local_control_planes_name_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CLUSTER_ENV, raising=False)
    assert server.local_cluster() == NAME
    monkeypatch.setenv(CLUSTER_ENV, "validate-ci-7")
    assert server.local_cluster() == "validate-ci-7"
    for bad in ("../x", "Upper", "a" * 41, "-x"):
        monkeypatch.setenv(CLUSTER_ENV, bad)
        with pytest.raises(UserError, match=f"{CLUSTER_ENV}=.*expected lowercase letters"):
            server.local_cluster()


def test_cluster_folders_follow_the_state_dir_and_built_binaries_stay_in_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KVTIER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(binaries.STATE_ENV)
    assert lifecycle.workdir("c1").parent.parent == tmp_path / "cache", "by default the cache holds both"
    monkeypatch.setenv(binaries.STATE_ENV, str(tmp_path / "state"))
    assert lifecycle.workdir("c1") == tmp_path / "state" / "clusters" / "c1"
    assert sharing.users_dir("c1") == tmp_path / "state" / "cluster-users" / "c1"
    assert realnode_config.layout("c1").root == tmp_path / "state" / "real-clusters" / "c1"
    assert binaries.path("kube-apiserver").parent == tmp_path / "cache" / "bin"
