"""router-args-parse (the rendered vllm-router args, read by vllm-router's own parser) and tp-shm-size
(engine.shmSize for tensor parallel in one pod)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import helm, paths, toolchain
from kvtier.validate import catalogue
from kvtier.validate.checks import router_rules
from kvtier.validate.inputs import loader
from kvtier.validate.rules import ManifestsContext, ValuesContext

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data
CHART = paths.CHARTS / "kv-tiered-inference"
RULE = "router-args-parse"

# What _router.tpl renders for one model with Kubernetes discovery (prefixaware), before router.extraArgs.
CHART_ARGS = [
    "--host", "0.0.0.0", "--port", "8000", "--policy", "cache_aware",
    "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000",
    "--service-discovery", "--selector", "app.kubernetes.io/component=engine", "kv-tiered-inference/model=m",
    "--service-discovery-namespace", "kv", "--service-discovery-port", "8000",
]  # fmt: skip
# kvaware with StatefulSet addresses, a custom block size and the API key.
KV_STATIC_ARGS = [
    "--host", "0.0.0.0", "--port", "8000", "--policy", "kv_aware",
    "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000",
    "--worker-urls", "http://e-0.e.kv.svc:8000", "http://e-1.e.kv.svc:8000",
    "--kv-event-source", "http://e-0.e.kv.svc:8000=tcp://e-0.e.kv.svc:5557",
    "--kv-event-source", "http://e-1.e.kv.svc:8000=tcp://e-1.e.kv.svc:5557",
    "--kv-event-model", "Qwen/Qwen2-7B-Instruct", "--kv-event-block-size", "32",
    "--api-key", "$(VLLM_API_KEY)",
]  # fmt: skip


@pytest.fixture(scope="module")
def router_parser() -> None:
    pytest.importorskip("vllm_router.launch_router", reason="PyPI vllm-router not in the venv")
    if router_rules._parser() is None:
        pytest.skip("the installed vllm-router is not the pinned one")


def _router(args: list[str], command: list[str] | None = None, name: str = "m-router") -> dict[str, Any]:
    container = {"name": "router", "image": "vllm/vllm-router:test", "command": command or ["vllm-router"]}
    container["args"] = args
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "router"}},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def _check(*manifests: dict[str, Any]) -> list[Any]:
    return catalogue.run_manifests(ManifestsContext(list(manifests), "kv"), "env.yaml", only=[RULE])


# -- router-args-parse ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("router_parser")
@pytest.mark.parametrize("args", [CHART_ARGS, KV_STATIC_ARGS, [*CHART_ARGS, "--cache-threshold", "0.5"]])
def test_args_the_router_accepts_pass(args: list[str]) -> None:
    assert _check(_router(args)) == []


@pytest.mark.usefixtures("router_parser")
def test_production_stack_flags_in_extra_args_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--cache-threshold", "0.5", "--routing-logic", "session", "--session-key", "x-user-id"]
    [finding] = _check(_router([*CHART_ARGS, *extra]))
    assert finding.severity == "error" and finding.rule == RULE
    assert "refuses router.extraArgs[2] '--routing-logic'" in finding.message
    assert "unrecognized arguments: --routing-logic session --session-key x-user-id" in finding.message
    assert finding.subject == "Deployment/m-router"
    assert finding.path == f"spec.template.spec.containers[router].args[{len(CHART_ARGS) + 2}]"
    out = capsys.readouterr()
    assert out.out == "" and out.err == "", "argparse's usage must not reach the terminal"


@pytest.mark.usefixtures("router_parser")
@pytest.mark.parametrize(
    ("extra", "index", "fragment"),
    [
        (["--cache-threshold", "high"], 0, "argument --cache-threshold: invalid float value: 'high'"),
        (["--port=http"], 0, "argument --port: invalid int value: 'http'"),  # overrides the chart's --port
        (
            ["--max-payload-size", "1", "--policy", "session"],
            2,
            "argument --policy: invalid choice: 'session'",
        ),
        (["--kv-aware-session-affinity-ttl-secs", "0"], 0, "must be between 1 and 31536000"),  # validated
        (["--request-timeout-secs"], 0, "argument --request-timeout-secs: expected one argument"),
        (["--help"], 0, "prints its help or version and exits"),
    ],
)
def test_bad_values_in_extra_args_are_errors(extra: list[str], index: int, fragment: str) -> None:
    [finding] = _check(_router([*CHART_ARGS, *extra]))
    assert finding.severity == "error"
    assert f"router.extraArgs[{index}] {extra[index]!r}" in finding.message
    assert fragment in finding.message


@pytest.mark.usefixtures("router_parser")
def test_an_env_reference_the_parser_refuses_is_only_a_warning() -> None:
    [finding] = _check(_router([*CHART_ARGS, "--request-timeout-secs", "$(TIMEOUT)"]))
    assert finding.severity == "warning"
    assert "router.extraArgs[0] '--request-timeout-secs'" in finding.message
    assert "$(VAR) reference" in finding.message


@pytest.mark.usefixtures("router_parser")
def test_env_references_are_kept_as_text_where_a_string_is_taken() -> None:
    assert _check(_router([*CHART_ARGS, "--api-key", "$(VLLM_API_KEY)"])) == []


@pytest.mark.usefixtures("router_parser")
def test_a_refusal_in_the_chart_flags_is_traced_to_the_chart() -> None:
    broken = [a if a != "cache_aware" else "prefixaware" for a in CHART_ARGS]  # e.g. a post-renderer
    [finding] = _check(_router(broken))
    assert finding.severity == "error"
    assert "the chart's own router flags (--policy)" in finding.message
    assert "router.extraArgs" not in finding.message
    assert finding.path == "spec.template.spec.containers[router].args"


@pytest.mark.usefixtures("router_parser")
def test_every_router_and_only_routers_are_read() -> None:
    engine = _router(["serve", "m", "--routing-logic", "x"], command=["vllm"], name="m-engine")
    bad = [*CHART_ARGS, "--session-key", "k"]
    found = _check(engine, _router(CHART_ARGS, name="a-router"), _router(bad, name="b-router"))
    assert [f.subject for f in found] == ["Deployment/b-router"]
    # the args in `command` after vllm-router count too, and shift the index in `args`
    [finding] = _check(_router(["--session-key", "k"], command=["/usr/bin/vllm-router", *CHART_ARGS]))
    assert finding.path == "spec.template.spec.containers[router].args[0]"


def test_nothing_without_vllm_router(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_router.launch_router", None)  # import raises ImportError
    router_rules._parser.cache_clear()
    try:
        assert router_rules._parser() is None
        assert _check(_router([*CHART_ARGS, "--routing-logic", "session"])) == []
    finally:
        monkeypatch.undo()
        router_rules._parser.cache_clear()


def test_nothing_with_another_router_release(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vllm_router.launch_router")
    monkeypatch.setattr(toolchain, "versions", lambda: {"VLLM_ROUTER_VERSION": "0.0.1"})
    router_rules._parser.cache_clear()
    try:
        assert router_rules._parser() is None
    finally:
        monkeypatch.undo()
        router_rules._parser.cache_clear()


@pytest.mark.parametrize(
    ("argv", "end"),
    [
        (CHART_ARGS, len(CHART_ARGS)),
        (KV_STATIC_ARGS, len(KV_STATIC_ARGS)),
        ([*CHART_ARGS, "--cache-threshold", "0.5"], len(CHART_ARGS)),
        ([*CHART_ARGS, "--port", "1"], len(CHART_ARGS)),  # out of the chart's order: the user's
        ([*KV_STATIC_ARGS[:-2], "--kv-event-model", "x"], len(KV_STATIC_ARGS) - 2),  # the chart's once
        (["--host", "h", "--worker-urls", "--policy", "random"], 3),  # an empty worker list
        ([], 0),
    ],
)
def test_chart_end_splits_the_chart_flags_from_extra_args(argv: list[str], end: int) -> None:
    assert router_rules.chart_end(argv) == end


def _render(sets: dict[str, str]) -> list[dict[str, Any]]:
    if not (paths.TOOLS_BIN / "helm3").exists():
        pytest.skip("the pinned Helm 3 is not installed (make tools)")
    helm.build_dependencies(CHART)  # when this module runs alone, nothing else has packaged curvine
    args = [
        "template",
        "rel",
        str(CHART),
        "--namespace",
        "kv",
        "-f",
        str(paths.VALUES / "prod-g6e-4xlarge.yaml"),
    ]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    result = helm.run(args, major=3, timeout=120)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


STATIC = {
    "router.discovery.mode": "static",
    "router.discovery.staticWorkers.qwen2-7b[0].url": "http://w:8000",
    "router.discovery.staticWorkers.qwen2-7b[0].kvEvents": "tcp://w:5557",
}


@pytest.mark.usefixtures("router_parser")
@pytest.mark.parametrize(
    "sets",
    [
        {"routing.strategy": "prefixaware"},
        {"routing.strategy": "kvaware"},
        {"routing.strategy": "session"},
        {"routing.strategy": "roundrobin", "auth.apiKeySecret.name": "key"},
        {"routing.strategy": "kvaware", **STATIC},
        {"routing.strategy": "prefixaware", **STATIC},
    ],
    ids=["prefixaware", "kvaware", "session", "roundrobin-apikey", "kvaware-static", "static"],
)
def test_the_chart_renders_router_args_the_router_accepts(sets: dict[str, str]) -> None:
    docs = _render(sets)
    routers = list(router_rules.router_argvs(ManifestsContext(docs, "kv")))
    assert routers, "no router rendered"
    for _, _, argv, _ in routers:
        assert router_rules.chart_end(argv) == len(argv), argv  # the chart's flags, in the chart's order
    assert _check(*docs) == []


@pytest.mark.usefixtures("router_parser")
def test_rendered_extra_args_are_traced_to_router_extra_args() -> None:
    extra = ["--cache-threshold", "0.5", "--session-key", "x"]
    sets = {f"router.extraArgs[{i}]": item for i, item in enumerate(extra)}
    docs = _render({"routing.strategy": "kvaware", **sets})
    [finding] = _check(*docs)
    assert "refuses router.extraArgs[2] '--session-key'" in finding.message


# -- tp-shm-size ------------------------------------------------------------------------------------------


def _shm(shm: Any, *gpus: int, **top: Any) -> list[Any]:
    values = copy.deepcopy(GOOD)
    values.update(top)
    if shm is not None:
        values.setdefault("engine", {})["shmSize"] = shm
    values["models"] = [
        {**values["models"][0], "name": f"m{i}", "gpusPerReplica": g} for i, g in enumerate(gpus)
    ]
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded), only=["tp-shm-size"])


@pytest.mark.parametrize("shm", ["64Mi", "512Mi", "1023Mi", 1073741823, "1.07G", "0"])
def test_a_small_shm_with_tensor_parallel_is_an_error(shm: Any) -> None:
    [finding] = _shm(shm, 4)
    assert finding.severity == "error" and finding.path == "engine.shmSize"
    assert f"engine.shmSize {shm} is below 1Gi" in finding.message
    assert "models[0] (4 GPUs)" in finding.message and finding.line is not None


@pytest.mark.parametrize("shm", ["1Gi", "1024Mi", 1073741824, "1.1G", "8Gi", None])
def test_one_gib_or_more_passes(shm: Any) -> None:
    assert _shm(shm, 4) == []


def test_a_single_gpu_needs_no_shm() -> None:
    assert _shm("64Mi", 1) == []
    assert _shm("64Mi", 1, 1) == []


def test_only_the_models_with_several_gpus_are_named() -> None:
    [finding] = _shm("256Mi", 1, 2, 8)
    assert "(models[1] (2 GPUs), models[2] (8 GPUs))" in finding.message
    assert "models[0]" not in finding.message


def test_hyperpod_and_cpu_are_not_judged() -> None:
    assert _shm("64Mi", 4, target="hyperpod") == []
    assert _shm("64Mi", 4, engine={"accelerator": "cpu", "shmSize": "64Mi"}) == []
    assert _shm("64Mi", 4, engine={"accelerator": "nvidia", "shmSize": "64Mi"}) != []


def test_the_chart_default_passes() -> None:
    default = yaml.safe_load((CHART / "values.yaml").read_text())["engine"]["shmSize"]
    assert _shm(default, 8) == []


# -- router-args-reserved ---------------------------------------------------------------------------------


def _reserved(*manifests: dict[str, Any]) -> list[Any]:
    return catalogue.run_manifests(
        ManifestsContext(list(manifests), "kv"), "env.yaml", only=["router-args-reserved"]
    )


@pytest.mark.usefixtures("router_parser")
@pytest.mark.parametrize(
    ("extra", "flag", "effective"),
    [
        (["--port", "9000"], "--port", 9000),
        (["--port=9001"], "--port", 9001),  # argparse's `=` spelling
        (["--prometheus-port", "1234"], "--prometheus-port", 1234),
        (["--cache-threshold", "0.5", "--policy", "random"], "--policy", "random"),
        (
            ["--service-discovery-port", "9", "--service-discovery-port", "8001"],
            "--service-discovery-port",
            8001,
        ),
    ],
)
def test_an_extra_arg_that_replaces_a_chart_flag_is_named_with_both_values(
    extra: list[str], flag: str, effective: Any
) -> None:
    [finding] = _reserved(_router([*CHART_ARGS, *extra]))
    at = max(i for i, item in enumerate(extra) if item.split("=")[0] == flag)
    chart = CHART_ARGS[CHART_ARGS.index(flag) + 1]
    assert f"router.extraArgs[{at}] {extra[at]!r} overrides the chart's {flag}" in finding.message
    assert f"becomes {effective!r}" in finding.message and repr(chart).strip("'") in finding.message
    assert finding.path == f"spec.template.spec.containers[router].args[{len(CHART_ARGS) + at}]"


@pytest.mark.usefixtures("router_parser")
@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--cache-threshold", "0.5"],  # a flag the chart does not render
        ["--port", "8000"],  # the chart's own value again changes nothing
    ],
)
def test_extra_args_that_leave_the_chart_flags_alone_pass(extra: list[str]) -> None:
    assert _reserved(_router([*CHART_ARGS, *extra])) == []
