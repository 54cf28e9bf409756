"""kube-sysctl-admitted (kvtier.validate.checks.sysctl_rules): the pod's sysctls as the API server and the
kubelet's SysctlForbidden admission judge them."""

from __future__ import annotations

from typing import Any

import pytest

from harness.manifests import run_rule, workload
from kvtier.validate import catalogue
from kvtier.validate.checks.sysctl_rules import SAFE, dotted, judge, namespace
from kvtier.validate.findings import Finding

RULE = "kube-sysctl-admitted"


def _deployment(*names: Any, **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [{"name": "engine", "image": "e:v1"}],
        "securityContext": {"sysctls": [{"name": n, "value": "1"} for n in names]},
        **spec,
    }
    return workload(pod)


def _run(*manifests: dict[str, Any]) -> list[Finding]:
    return run_rule(RULE, *manifests)


def test_the_rule_is_registered_with_its_sources() -> None:
    r = catalogue.all_rules()[RULE]
    assert r.scope == "manifests"
    assert "allowlist.go" in r.reason and "safe_sysctls.go" in r.reason


@pytest.mark.parametrize("name", sorted(SAFE))
def test_every_safe_sysctl_is_admitted(name: str) -> None:
    assert judge(name, {}) is None
    assert _run(_deployment(name)) == []


@pytest.mark.parametrize(
    "name",
    [
        "vm.max_map_count",
        "vm.swappiness",
        "fs.file-max",
        "fs.inotify.max_user_watches",
        "kernel.pid_max",
        "vm/overcommit_memory",
        "kernel.panic",
    ],
)
def test_a_node_wide_sysctl_is_an_error(name: str) -> None:
    [f] = _run(_deployment(name))
    assert f.severity == "error" and "SysctlForbidden" in f.message and "node-wide" in f.message
    assert "sysctls[0].name" in f.path


@pytest.mark.parametrize(
    "name",
    [
        "net.core.somaxconn",
        "net.ipv4.tcp_max_syn_backlog",
        "kernel.shmmax",
        "kernel.msgmax",
        "kernel.sem",
        "fs.mqueue.msg_max",
        "net/core/somaxconn",
    ],
)
def test_a_namespaced_unsafe_sysctl_is_a_warning_naming_the_node_setting(name: str) -> None:
    [f] = _run(_deployment(name))
    assert f.severity == "warning"
    assert "allowed-unsafe-sysctls" in f.message and "configz" in f.message


@pytest.mark.parametrize(
    ("name", "flag"),
    [
        ("net.ipv4.ip_local_port_range", "hostNetwork"),
        ("net.core.somaxconn", "hostNetwork"),
        ("kernel.shm_rmid_forced", "hostIPC"),
        ("fs.mqueue.msg_max", "hostIPC"),
    ],
)
def test_a_sysctl_of_a_namespace_shared_with_the_node_is_an_error(name: str, flag: str) -> None:
    [f] = _run(_deployment(name, **{flag: True}))
    assert f.severity == "error" and flag in f.message
    # the other host namespace does not matter
    other = "hostIPC" if flag == "hostNetwork" else "hostNetwork"
    assert all(x.severity == "warning" for x in _run(_deployment(name, **{other: True})))


@pytest.mark.parametrize(
    "name", ["Net.core.somaxconn", "net..core", "net.core.", ".net", "net.core somaxconn", "a" * 254, "", 7]
)
def test_a_malformed_name_is_an_error(name: Any) -> None:
    [f] = _run(_deployment(name))
    assert f.severity == "error" and "API server" in f.message


def test_a_name_set_twice_is_an_error_but_spellings_differ() -> None:
    [f] = _run(_deployment("net.ipv4.tcp_syncookies", "net.ipv4.tcp_syncookies"))
    assert f.severity == "error" and "twice" in f.message and "sysctls[1]" in f.path
    assert _run(_deployment("net.ipv4.tcp_syncookies", "net/ipv4/tcp_syncookies")) == []


def test_slashed_names_are_read_as_the_kubelet_reads_them() -> None:
    assert dotted("net/ipv4/conf/eth0.100/rp_filter") == "net.ipv4.conf.eth0/100.rp_filter"
    assert dotted("net.ipv4.conf.eth0/100.rp_filter") == "net.ipv4.conf.eth0/100.rp_filter"
    assert dotted("kernel/shm_rmid_forced") == "kernel.shm_rmid_forced"
    assert namespace("kernel.semx") is None and namespace("kernel.sem") == "ipc"
    assert namespace("network.x") is None and namespace("net.x") == "net"


def test_pods_without_sysctls_and_other_kinds_are_left_alone() -> None:
    plain = _deployment()
    plain["spec"]["template"]["spec"].pop("securityContext")
    assert _run(plain, {"kind": "ConfigMap", "metadata": {"name": "c"}}) == []
