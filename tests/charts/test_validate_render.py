"""`kvtier validate` end to end with the pinned Helm 3 and 4 over the real charts and environments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kvtier import paths
from kvtier.cli import main
from kvtier.validate.layers import kube

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
CHECKS = [
    "schema",
    "rules",
    "render helm3",
    "render helm4",
    *(f"k8s {m}" for m in kube.DEFAULT_MINORS),
    "LMCache config",
    "Curvine TOML",
    "HyperPod SDK",
    "cross-pod (rendered)",
    "policy",
    "API server (dry run)",  # opt-in (--server): skipped, saying so
    "vLLM arguments",  # opt-in (--vllm): skipped, saying so
]


@pytest.fixture(autouse=True)
def _helm(need) -> None:
    need(
        (paths.TOOLS_BIN / "helm3").exists() and (paths.TOOLS_BIN / "helm4").exists(),
        "pinned Helm: make tools",
    )


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["validate", "--output", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def _only_facts_source(env: dict) -> bool:
    """Whether the environment's rule findings are all "the model's facts are not the Hub's" warnings, and
    some are."""
    rules = [f for f in env["findings"] if f["check"] == "rules"]
    return bool(rules) and all(f["rule"] == "model-facts-source" for f in rules)


def test_every_environment_passes_every_layer(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(paths.VALUES.glob("*.yaml"))
    assert files, "values/ has no environment"
    code, out = _json([], capsys)
    assert code == 0, [f for e in out["environments"] for f in e["findings"] if f.get("severity") == "error"]
    for env in out["environments"]:
        assert list(env["checks"]) == CHECKS, env["file"]
        curvine = (yaml.safe_load(Path(env["file"]).read_text()).get("curvine") or {}).get("enabled", True)
        for check in (
            "schema",
            "rules",
            "render helm3",
            "render helm4",
            "Curvine TOML",
            "cross-pod (rendered)",
            "policy",
        ):
            # Without Curvine (values/cpu.yaml: L2 on an existing RWX claim) there is no TOML to load.
            expected = "skipped" if check == "Curvine TOML" and not curvine else "ok"
            if check == "rules" and _only_facts_source(env):
                # The tests are offline from the Hub (tests/conftest.py): each model's facts come from the
                # shipped facts (dev and cpu serve Qwen2-0.5B-Instruct, which has none), and say so.
                expected = "warning"
            assert env["checks"][check]["status"] == expected, (env["file"], check, env["checks"][check])
        for minor in kube.DEFAULT_MINORS:
            assert env["checks"][f"k8s {minor}"]["status"] in ("ok", "warning"), (env["file"], minor)
        # The tests run offline (tests/conftest.py); the API server's default is tested on the cluster.
        for judge, why in (("API server (dry run)", "offline"), ("vLLM arguments", "not asked")):
            assert env["checks"][judge] == {"status": "skipped", "detail": env["checks"][judge]["detail"]}
            assert env["checks"][judge]["detail"].startswith(why), env["checks"][judge]


def test_standalone_environments_render_an_lmcache_config_and_pass_its_loader(capsys) -> None:
    _, out = _json([], capsys)
    standalone = [e for e in out["environments"] if "hyperpod" not in Path(e["file"]).name]
    assert standalone
    for env in standalone:
        status = env["checks"]["LMCache config"]
        if (yaml.safe_load(Path(env["file"]).read_text()).get("cache") or {}).get("backend") == "vllm-native":
            assert status == {"status": "skipped", "detail": "no such config file in the render"}, env["file"]
            continue
        assert status["status"] in ("ok", "not available"), (env["file"], status)
        assert status["status"] != "skipped", env["file"]


def test_schema_errors_name_key_and_skip_rendering(capsys) -> None:
    code, out = _json([str(FIXTURES / "bad-schema.yaml")], capsys)
    [env] = out["environments"]
    assert code == 1
    typo = next(f for f in env["findings"] if f["path"] == "cache.chunkSzie")
    assert typo["line"] == 4 and typo["suggestion"] == "did you mean 'chunkSize'?"
    assert {f["path"] for f in env["findings"]} >= {"routing.strategy", "models[0].replicas"}
    assert env["checks"]["render helm3"]["status"] == "skipped"
    assert "schema errors" in env["checks"]["render helm3"]["detail"]


def test_rule_errors_are_reported_with_ids(capsys) -> None:
    code, out = _json(["--no-render", str(FIXTURES / "bad-rules.yaml")], capsys)
    [env] = out["environments"]
    assert code == 1 and env["checks"]["schema"]["status"] == "ok"
    by_rule = {f["rule"]: f for f in env["findings"]}
    errors = {rule for rule, finding in by_rule.items() if finding["severity"] == "error"}
    assert errors == {"l1-fits-memory", "tp-equals-gpus", "engine-args-reserved", "curvine-masters-odd"}
    # Its workers keep the chart's pod network over an instance-store data dir: a warning beside them; and the
    # tests run offline (HF_HUB_OFFLINE), so the model's facts come from the shipped data, which is said once.
    assert set(by_rule) - errors == {"curvine-worker-local-to-its-disk", "model-facts-source"}
    assert by_rule["curvine-masters-odd"]["line"] == 21 and by_rule["curvine-masters-odd"]["reason"]


def test_chart_refusal_is_a_render_finding(capsys) -> None:
    code, out = _json([str(FIXTURES / "bad-render.yaml")], capsys)
    [env] = out["environments"]
    assert code == 1 and env["checks"]["schema"]["status"] == "ok"
    render = [f for f in env["findings"] if f["check"] == "render helm3"]
    assert render and "limits.memory" in render[0]["message"] and "Use --debug" not in render[0]["message"]
    assert any(f["rule"] == "l1-fits-memory" for f in env["findings"])  # the rule saw it before Helm


def test_pod_security_level_is_enforced_when_declared(capsys) -> None:
    # A standalone environment with Curvine, whose CSI node plugin must run privileged (FUSE).
    env_file = paths.VALUES / "dev.yaml"
    # Offline, the release renders into "default" (helm template's namespace without a cluster).
    code, out = _json(["--pod-security", "default=baseline", str(env_file)], capsys)
    [env] = out["environments"]
    findings = [f for f in env["findings"] if f["rule"] == "policy-pod-security"]
    assert code == 1 and findings and "needs Pod Security 'privileged'" in findings[0]["message"]


def test_human_summary_lists_every_check_per_environment(capsys, monkeypatch) -> None:
    # Wide enough for every environment's column unfolded (a narrow terminal folds long names).
    monkeypatch.setenv("COLUMNS", "220")
    assert main(["validate"]) in (0, 1)
    out = capsys.readouterr().out
    for check in CHECKS:
        assert check in out
    for path in paths.VALUES.glob("*.yaml"):
        assert path.stem in out


def test_newer_minors_accept_the_hyperpod_admission_policy(capsys) -> None:
    hyperpod = sorted(paths.VALUES.glob("hyperpod*.yaml"))
    assert hyperpod, "values/ ships hyperpod environments; none found"
    code, out = _json(["--kube-versions", "1.36-1.37", str(hyperpod[0])], capsys)
    [env] = out["environments"]
    assert code == 0 and not [f for f in env["findings"] if f["rule"] == "k8s.not-served"]


def test_unknown_context_is_a_clear_usage_error(tmp_path: Path, capsys) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    code = main(
        [
            "validate",
            "--no-render",
            "--context",
            "nope",
            "--kubeconfig",
            str(kubeconfig),
            str(FIXTURES / "good-minimal.yaml"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--context nope: no such context" in err and "Traceback" not in err


def test_hyperpod_endpoints_pass_the_sdk_models(capsys, hyperpod_sdk_ready) -> None:
    """Every HyperPod environment through AWS's SDK models: no wrong value; v3.7 fields only as warnings."""
    _, out = _json([], capsys)
    hyperpod = [e for e in out["environments"] if "hyperpod" in Path(e["file"]).name]
    assert len(hyperpod) >= 2
    for env in hyperpod:
        status = env["checks"]["HyperPod SDK"]
        sdk = [f for f in env["findings"] if f["check"] == "HyperPod SDK"]
        assert status["status"] in ("ok", "warning"), (env["file"], status)
        assert {f["rule"] for f in sdk} <= {"hyperpod-sdk.unknown-field"}, sdk
        # traced to the values keys that produced them (provenance), else the rendered field
        allowed = {"hyperpod.tolerations", "spec.tolerations", "hyperpod.lmcache", "spec.lmcache"}
        assert {f["path"] for f in sdk} <= allowed, sdk
        assert "spec.tolerations" not in {f["path"] for f in sdk}, "the tolerations come from a values key"
    for env in out["environments"]:
        if "hyperpod" not in Path(env["file"]).name:
            assert env["checks"]["HyperPod SDK"]["status"] == "skipped", env["file"]


def test_sdk_layer_says_it_was_not_available(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("KVTIER_HYPERPOD_SDK_PYTHON", str(tmp_path / "no-python"))
    code, out = _json([str(paths.VALUES / "hyperpod-g6e-4xlarge.yaml")], capsys)
    [env] = out["environments"]
    assert code == 0
    status = env["checks"]["HyperPod SDK"]
    assert status["status"] == "not available"
    assert "sagemaker-hyperpod" in status["detail"] and "make hyperpod-sdk" in status["detail"]
