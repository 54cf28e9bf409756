"""A real node: containers really start, their output is read back, Services resolve by DNS name,
`helm test` pods run their script (pass and fail), the cluster's addresses fail at once outside its
namespace, and `down` leaves the machine as it was."""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import re
import secrets
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode import machine, netns
from kvtier.cluster.realnode import routes as realroutes
from kvtier.toolchain import versions

CHART = Path(__file__).parent / "charts" / "echo-check"


def test_node_is_ready_with_the_pinned_kubelet_and_containerd(kube) -> None:
    node = json.loads(kube.kubectl("get", "node", realconfig.NODE_NAME, "-o", "json"))
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    info = node["status"]["nodeInfo"]
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert ready == "True"
    assert info["kubeletVersion"] == versions()["KUBERNETES_VERSION"]
    assert info["containerRuntimeVersion"].startswith("containerd://1.")
    assert addresses["InternalIP"] == netns.NODE_IP


def test_a_pod_runs_and_its_log_comes_back_through_kubectl(kube, real_cluster, namespace) -> None:
    ns = namespace("pod-log")
    marker = secrets.token_hex(8)
    # The output depends on the marker and on facts only a running container has (its pid, its hostname).
    script = f"import os, socket; print('{marker}', os.getpid(), socket.gethostname())"
    kube.kubectl(
        "run", "printer", "-n", ns, "--restart=Never", "--image", real_cluster.images["python"],
        "--image-pull-policy=Never", "--command", "--", "python3", "-c", script,
    )  # fmt: skip
    assert kube.wait_phase(ns, "printer", {"Succeeded", "Failed"}) == "Succeeded"
    words = kube.kubectl("logs", "printer", "-n", ns).split()
    assert words[0] == marker
    assert words[1] == "1"  # the container's own PID namespace: python3 is its first process
    assert words[2] == "printer"


def test_a_failing_container_is_reported_with_its_exit_code(kube, real_cluster, namespace) -> None:
    ns = namespace("pod-fail")
    kube.kubectl(
        "run", "failer", "-n", ns, "--restart=Never", "--image", real_cluster.images["python"],
        "--image-pull-policy=Never", "--command", "--", "python3", "-c", "import sys; sys.exit(7)",
    )  # fmt: skip
    assert kube.wait_phase(ns, "failer", {"Succeeded", "Failed"}) == "Failed"
    state = kube.kubectl(
        "get",
        "pod",
        "failer",
        "-n",
        ns,
        "-o",
        "jsonpath={.status.containerStatuses[0].state.terminated.exitCode}",
    )
    assert state == "7"


def test_a_service_is_reached_by_dns_name_from_a_pod(kube, real_cluster, namespace) -> None:
    ns = namespace("dns")
    marker = secrets.token_hex(8)
    image = real_cluster.images["python"]
    kube.kubectl(
        "run", "web", "-n", ns, "--image", image, "--image-pull-policy=Never", "--port=8000",
        "--labels=app=web", "--command", "--", "python3", "-c",
        "import http.server as h\n"
        "class A(h.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        f"        self.send_response(200); self.end_headers(); self.wfile.write(b'{marker}')\n"
        "h.HTTPServer(('', 8000), A).serve_forever()\n",
    )  # fmt: skip
    kube.kubectl("expose", "pod", "web", "-n", ns, "--port=80", "--target-port=8000")
    kube.kubectl("wait", "--for=condition=Ready", "pod/web", "-n", ns, "--timeout=120s")
    url = f"http://web.{ns}.svc.{realconfig.CLUSTER_DOMAIN}/"
    # kube-proxy programs the Service a moment after the pod turns Ready: retry refused connections.
    fetch = (
        "import socket, time, urllib.error, urllib.request\n"
        f"print(socket.gethostbyname('web.{ns}.svc.{realconfig.CLUSTER_DOMAIN}'))\n"
        "for attempt in range(30):\n"
        "    try:\n"
        f"        print(urllib.request.urlopen('{url}', timeout=10).read().decode()); break\n"
        "    except (urllib.error.URLError, ConnectionError):\n"
        "        if attempt == 29: raise\n"
        "        time.sleep(1)\n"
    )
    kube.kubectl(
        "run", "client", "-n", ns, "--restart=Never", "--image", image, "--image-pull-policy=Never",
        "--command", "--", "python3", "-c", fetch,
    )  # fmt: skip
    phase = kube.wait_phase(ns, "client", {"Succeeded", "Failed"})
    log = kube.kubectl("logs", "client", "-n", ns).split()
    assert phase == "Succeeded", log
    cluster_ip = kube.kubectl("get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
    assert log == [cluster_ip, marker]


def test_the_readmes_preflight_command_reaches_the_cluster_through_the_default_kubeconfig(
    real_cluster, tmp_path: Path
) -> None:
    """README's `kvtier preflight values/<env>.yaml -n inference --release kv` as written: no --kubeconfig,
    no $KUBECONFIG, only ~/.kube/config and its current context (run inside the cluster's namespace).
    The API server it names is the cluster's own, and every check ran against it."""
    from kvtier import paths

    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(Path(real_cluster.kubeconfig).read_text())
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"HOME": str(home)}
    argv = [str(paths.ROOT / ".venv" / "bin" / "kvtier"), "preflight", str(paths.VALUES / "cpu.yaml")]
    argv += ["-n", "default", "--release", "kv", "-o", "json"]
    proc = subprocess.run(real_cluster.command(argv), capture_output=True, text=True, env=env, timeout=300)
    # 0: ready; 1: findings (this bare node has no RWX claim for cpu.yaml); 2 would be a usage error.
    assert proc.returncode in (0, 1), f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    server = yaml.safe_load(Path(real_cluster.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    assert report["server"] == server and report["namespace"] == "default", report
    assert report["checks"] and all(c["status"] in {"pass", "warn", "fail", "skip"} for c in report["checks"])


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_helm_test_runs_the_chart_test_pod_for_real(kube, real_cluster, namespace, helm) -> None:
    ns = namespace(f"echo-{helm}")
    image = f"image={real_cluster.images['python']}"
    kube.helm(helm, "install", "echo", str(CHART), "-n", ns, "--set", image, "--wait", "--timeout", "120s")
    passed = kube.helm(helm, "test", "echo", "-n", ns, "--logs", "--timeout", "120s")
    assert "answered 'hello from a real pod' as expected" in passed.stdout
    # The pod's own log, read back through the API server from the kubelet.
    log = kube.kubectl("logs", "echo-test-answer", "-n", ns)
    assert f"http://echo-server.{ns}.svc.cluster.local/index.html answered" in log

    # A deliberately wrong value: the test pod's script must fail, with its own message.
    kube.helm(
        helm,
        "upgrade",
        "echo",
        str(CHART),
        "-n",
        ns,
        "--set",
        image,
        "--set",
        "expected=something else",
        "--wait",
    )
    failed = kube.helm(helm, "test", "echo", "-n", ns, "--logs", "--timeout", "120s", check=False)
    assert failed.returncode != 0
    message = "answered 'hello from a real pod', expected 'something else'"
    assert message in kube.kubectl("logs", "echo-test-answer", "-n", ns)
    phase = kube.kubectl("get", "pod", "echo-test-answer", "-n", ns, "-o", "jsonpath={.status.phase}")
    assert phase == "Failed"


REFUSED = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES}


def test_outside_its_namespace_the_cluster_addresses_fail_at_once(real_cluster) -> None:
    """A client left in the machine's namespace that dials the cluster's node, Service or pod range gets
    an error at once instead of sending the connection out the machine's default route."""
    # The test must run where such a client would: outside the cluster's namespace.
    own = os.stat("/proc/thread-self/ns/net").st_ino
    assert own != (netns.NETNS_DIR / real_cluster.namespace).stat().st_ino
    assert realroutes.present() == list(netns.PRIVATE_RANGES.values())
    for kind, cidr in netns.PRIVATE_RANGES.items():
        address = str(next(ipaddress.ip_network(cidr).hosts()))  # the node, the API Service, the bridge
        # A UDP connect only looks the route up (it sends nothing): if the range were routed, the TCP
        # dial below would leave the machine, so it must not be tried.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, pytest.raises(OSError) as lookup:
            probe.connect((address, realconfig.API_PORT))
        assert lookup.value.errno in REFUSED, f"the {kind} range {cidr} is routed out: {lookup.value}"
        with socket.socket() as client:
            client.settimeout(10)
            started = time.monotonic()
            with pytest.raises(OSError) as dial:
                client.connect((address, realconfig.API_PORT))
            elapsed = time.monotonic() - started
        assert dial.value.errno in REFUSED, f"dialling {address} ({kind}) failed with {dial.value!r}"
        assert elapsed < 1, f"dialling {address} ({kind}) took {elapsed:.1f} s to fail"


def _other_clusters(ours: str) -> set[str]:
    """The namespaces of node 1 of every other real-node cluster on the machine (this session's, a user's)."""
    return {ns.split(".")[0] for ns in netns.cluster_namespaces()} - {netns.name_for(ours)}


def _without(snapshot: dict[str, Any], others: set[str]) -> dict[str, Any]:
    """The snapshot's lists without the entries that name another cluster (its namespaces, their mounts, its
    cgroups): those come and go with that cluster's own pods, whatever this test does."""
    if not others:
        return snapshot
    theirs = re.compile("|".join(rf"{re.escape(o)}(?=$|[/. ])" for o in sorted(others)))
    return {
        key: [item for item in value if not theirs.search(item)] if isinstance(value, list) else value
        for key, value in snapshot.items()
    }


def test_down_leaves_the_machine_as_it_was(node_programs, kube_client) -> None:
    """A second cluster of its own: up, a pod (mounts, iptables, cgroups, sysctls change), down, compare.
    Other clusters on the machine (the session's, a user's) are left out of the comparison; the machine-wide
    values they also change (sysctls, shared routes, iptables) are compared only when none came or went
    meanwhile, which is always so in CI, whose node tests run one at a time."""
    name = f"node-down-{secrets.token_hex(2)}"
    others_before = _other_clusters(name)
    before = machine.snapshot()
    cluster = realnode.up(name, progress=lambda m: None)
    try:
        during = machine.snapshot()
        assert netns.name_for(name) in during["netns"]
        assert during["cgroups"] != before["cgroups"]  # the snapshot does see what a cluster adds
        assert realroutes.present() == list(netns.PRIVATE_RANGES.values())
        unreachable = [line for line in during["routes"] if line.startswith("unreachable ")]
        assert len(unreachable) >= len(netns.PRIVATE_RANGES)  # ... its routes too
        kube = kube_client(cluster)
        kube.kubectl(
            "run", "p", "--image", cluster.images["python"], "--image-pull-policy=Never", "--restart=Never",
            "--command", "--", "python3", "-c", "print('ran')",
        )  # fmt: skip
        assert kube.wait_phase("default", "p", {"Succeeded", "Failed"}) == "Succeeded"
        assert kube.kubectl("logs", "p").strip() == "ran"
        others_during = _other_clusters(name)
    finally:
        assert realnode.down(name, progress=lambda m: None)
    after = machine.snapshot()
    others_after = _other_clusters(name)
    assert not realnode.exists(name)
    # The routes are shared: they stay exactly while another real-node cluster (this session's) is up.
    assert bool(realroutes.present()) == bool(netns.cluster_namespaces())
    others = others_before | others_during | others_after
    before, after = _without(before, others), _without(after, others)
    came_or_went = others - (others_before & others_during & others_after)
    for key in before:
        if (isinstance(before[key], list) and key != "routes") or not came_or_went:
            assert after[key] == before[key], f"{key} changed by the cluster"
        else:
            print(f"[real node] {key} not compared: other clusters came or went: {sorted(came_or_went)}")
