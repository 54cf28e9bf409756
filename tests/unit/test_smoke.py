"""`kvtier smoke` in URL mode against stand-in servers on 127.0.0.1, and pod discovery on real
Kubernetes model objects (the real engines and router: tests/engine/)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from kubernetes.client import (
    V1Container,
    V1ContainerPort,
    V1EnvVar,
    V1EnvVarSource,
    V1ObjectMeta,
    V1Pod,
    V1PodCondition,
    V1PodSpec,
    V1PodStatus,
    V1Secret,
    V1SecretKeySelector,
    V1VolumeMount,
)
from test_kvcheck_fakes import FakeReplica, as_json, as_text, closed_port_url, serve

from kvtier import cli
from kvtier.errors import UserError
from kvtier.smoke import checks, reach

MODELS = {"data": [{"id": "tiny"}]}
COMPLETION = {"choices": [{"text": "x"}], "usage": {"completion_tokens": 3}}


def router_routes() -> dict:
    return {
        ("GET", "/health"): as_text("ok"),
        ("GET", "/v1/models"): as_json(MODELS),
        ("POST", "/v1/completions"): as_json(COMPLETION),
    }


def smoke_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = cli.main(["smoke", "--output", "json", *args])
    out = capsys.readouterr().out
    return code, ({o["id"]: o for o in json.loads(out)} if out.strip() else {})


def test_all_pass_or_skip_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(router_routes()) as router:
        code, outcomes = smoke_cli(capsys, "--router-url", router.url)
    assert code == 0
    assert [outcomes[c]["status"] for c in ("router", "completion")] == ["PASS", "PASS"]
    assert outcomes["crosspod"]["status"] == "SKIP" and outcomes["l2-files"]["status"] == "SKIP"


def test_a_failure_exits_1_with_a_remedy(capsys: pytest.CaptureFixture[str]) -> None:
    code, outcomes = smoke_cli(capsys, "--router-url", closed_port_url())
    assert code == 1
    assert outcomes["router"]["status"] == "FAIL" and "connection refused" in outcomes["router"]["summary"]
    assert outcomes["router"]["remedy"]
    assert outcomes["completion"]["status"] == "SKIP"  # no model known: not run, not failed twice


def test_no_urls_and_no_kubeconfig_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Without URL flags smoke goes to the cluster kubectl would use: here there is none.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert cli.main(["smoke"]) == 2
    err = capsys.readouterr().err
    assert "no kubeconfig: ~/.kube/config does not exist" in err and "--router-url" in err


def test_url_and_cluster_flags_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["smoke", "--router-url", "http://127.0.0.1:1", "--context", "prod"]) == 2
    assert "--context reach a cluster" in capsys.readouterr().err


def test_one_replica_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["smoke", "--replica-url", "http://127.0.0.1:1"]) == 2
    assert "give two replicas" in capsys.readouterr().err


def test_l2_on_runs_crosspod_and_l2_files(tmp_path: Path) -> None:
    (tmp_path / "chunk.data").write_bytes(b"kv")
    a, b = FakeReplica(), FakeReplica(hit_tokens=512)
    with serve(router_routes()) as router, serve(a.routes()) as sa, serve(b.routes()) as sb:
        sa.first_chunk_delay_s = 0.2
        targets = checks.Targets(
            router.url, [sa.url, sb.url], l2_enabled=True, l2_dir=str(tmp_path), words=40
        )
        outcomes = {o["id"]: o for o in checks.run_checks(targets)}
    assert {k: o["status"] for k, o in outcomes.items()} == {
        "router": "PASS",
        "completion": "PASS",
        "crosspod": "PASS",
        "l2-files": "PASS",
        "curvine-workers": "SKIP",
    }
    assert outcomes["crosspod"]["b"]["external_hit_tokens"] == 512


def test_curvine_check_in_url_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with serve({("GET", "/api/overview"): as_json({"live_workers": 1, "lost_workers": 2})}) as master:
        code, outcomes = smoke_cli(capsys, "--curvine-url", master.url, "--curvine-workers", "2")
    assert code == 1
    assert outcomes["curvine-workers"]["status"] == "FAIL" and outcomes["curvine-workers"]["lost"] == 2


def test_every_check_has_a_reason_and_a_remedy() -> None:
    assert len({c.id for c in checks.CHECKS}) == len(checks.CHECKS)
    assert all(c.reason and c.remedy for c in checks.CHECKS)


# --- discovery on real Kubernetes model objects ---------------------------------------------------


def pod(name: str, ready: bool = True, env: list | None = None, mounts: list | None = None) -> V1Pod:
    container = V1Container(
        name="vllm",
        ports=[
            V1ContainerPort(name="metrics", container_port=9000),
            V1ContainerPort(name="http", container_port=8000),
        ],
        env=env,
        volume_mounts=mounts,
    )
    status = "True" if ready else "False"
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(containers=[container]),
        status=V1PodStatus(phase="Running", conditions=[V1PodCondition(type="Ready", status=status)]),
    )


class PodList:
    """The one API call discovery makes, answered from a fixed list (the API server's side of it is
    exercised by the cluster tests)."""

    def __init__(self, pods: list[V1Pod]) -> None:
        self.items = pods
        self.selectors: list[str] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> PodList:
        self.selectors.append(label_selector)
        return self


def test_find_returns_ready_pods_with_the_named_port() -> None:
    api = PodList([pod("e-1"), pod("e-0"), pod("e-2", ready=False)])
    found = reach.find(api, "ns", "sel", ("http",), "engine")
    assert [(p.pod, p.port) for p in found] == [("e-0", 8000), ("e-1", 8000)]


def test_find_without_ready_pods_says_how_to_look() -> None:
    with pytest.raises(UserError, match=r"no Ready engine pod .* `kubectl get pods -n ns -l sel`"):
        reach.find(PodList([pod("e-0", ready=False)]), "ns", "sel", ("http",), "engine")


def test_an_optional_part_the_release_leaves_out_is_no_error_but_one_not_ready_is() -> None:
    """values/cpu.yaml has no Curvine: its absence skips the Curvine check; a master that exists but is
    not Ready still stops smoke with the kubectl command to look at it."""
    assert reach.find(PodList([]), "ns", "sel", ("web",), "Curvine master", optional=True) == []
    with pytest.raises(UserError, match="no Ready engine pod"):
        reach.find(PodList([]), "ns", "sel", ("http",), "engine")
    with pytest.raises(UserError, match="no Ready Curvine master pod"):
        reach.find(PodList([pod("m-0", ready=False)]), "ns", "sel", ("web",), "Curvine master", optional=True)


def test_l2_path_from_hyperpod_env_or_chart_volume() -> None:
    patched = pod(
        "p", env=[V1EnvVar(name="LMCACHE_REMOTE_URL", value="fs://localhost:0/mnt/curvine/l2cache/")]
    )
    assert reach.l2_path(patched, "vllm") == "/mnt/curvine/l2cache/"
    chart = pod("c", mounts=[V1VolumeMount(name="l2cache", mount_path="/mnt/l2")])
    assert reach.l2_path(chart, "vllm") == "/mnt/l2"
    remote = pod("r", env=[V1EnvVar(name="LMCACHE_REMOTE_URL", value="sagemaker-hyperpod://10.0.0.1:9200")])
    assert reach.l2_path(remote, "vllm") is None
    # HyperPod InProcess with the chart's L2 plugin (cache.l2.integrity): its base_path, the operator's own
    # LMCACHE_EXTRA_CONFIG (no base_path) and one that is not JSON count for nothing.
    plugin = json.dumps({"remote_storage_plugin.kvtier_l2.base_path": "/mnt/curvine/l2cache/m.0123456789ab"})
    sealed = pod("s", env=[V1EnvVar(name="LMCACHE_EXTRA_CONFIG", value=plugin)])
    assert reach.l2_path(sealed, "vllm") == "/mnt/curvine/l2cache/m.0123456789ab"
    for other in ('{"tiered_storage": true}', "x", "[1]"):
        operator = pod("o", env=[V1EnvVar(name="LMCACHE_EXTRA_CONFIG", value=other)])
        assert reach.l2_path(operator, "vllm") is None


class Secrets:
    """read_namespaced_secret from {name: {key: base64 value}}; any other name is forbidden."""

    def __init__(self, secrets: dict[str, dict[str, str]]) -> None:
        self.secrets = secrets

    def read_namespaced_secret(self, name: str, namespace: str) -> V1Secret:
        if name not in self.secrets:
            raise RuntimeError(f'(403) secrets "{name}" is forbidden')
        return V1Secret(data=self.secrets[name])


def test_the_api_key_comes_from_the_secret_the_engines_read() -> None:
    ref = V1EnvVarSource(secret_key_ref=V1SecretKeySelector(name="kv-key", key="api-key"))
    engine = pod("e-0", env=[V1EnvVar(name="VLLM_API_KEY", value_from=ref)])
    source = reach.api_key_source(engine, "vllm")
    assert source == ("kv-key", "api-key")
    api = Secrets({"kv-key": {"api-key": base64.b64encode(b"s3cret").decode()}})
    assert reach.read_api_key(api, "ns", source) == "s3cret"
    assert reach.api_key_source(pod("open"), "vllm") is None
    assert reach.read_api_key(api, "ns", None) is None


def test_an_unreadable_api_key_secret_says_how_to_pass_the_key() -> None:
    with pytest.raises(UserError, match=r"Secret ns/other .*forbidden.*export VLLM_API_KEY"):
        reach.read_api_key(Secrets({}), "ns", ("other", "api-key"))
    with pytest.raises(UserError, match=r"has no key 'api-key'"):
        reach.read_api_key(Secrets({"kv-key": {}}), "ns", ("kv-key", "api-key"))


def test_kvcheck_sends_the_key_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvtier.podscripts import kvcheck

    sent: list[str | None] = []
    monkeypatch.setattr(
        kvcheck.urllib.request, "urlopen", lambda r, timeout: sent.append(r.get_header("Authorization"))
    )
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setattr(kvcheck, "API_KEY", None)
    kvcheck._open("http://h:1/v1/models")
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    kvcheck._open("http://h:1/v1/models")
    monkeypatch.setattr(kvcheck, "API_KEY", "from-release")
    kvcheck._open("http://h:1/v1/models")
    assert sent == [None, "Bearer from-env", "Bearer from-release"]


def test_default_selectors_follow_the_chart_labels() -> None:
    selectors = reach.Selectors.for_release("prod")
    assert selectors.engine == "app.kubernetes.io/instance=prod,app.kubernetes.io/component=engine"
    assert selectors.router.endswith("component=router") and selectors.curvine
    assert selectors.curvine.endswith("component=master")


def test_unusable_kubeconfig_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [a kubeconfig")
    assert cli.main(["smoke", "--kubeconfig", str(bad)]) == 2
    assert "not a usable kubeconfig" in capsys.readouterr().err
