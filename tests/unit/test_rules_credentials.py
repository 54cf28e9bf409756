"""The rules on what the values must not hold literally (an API key, a credential env var) and on pinned
Hugging Face revisions: every spelling vLLM reads, the references Kubernetes expands, the production
environments (values files named prod-*.yaml), and positions in the user's file."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.validate import catalogue, pipeline
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data
SHA = "f2826a00ceef68f0f2b946d945ecc0477ce4450c"
FROM_SECRET = {"secretKeyRef": {"name": "vllm-auth", "key": "api-key"}}


def _run(rule_id: str, values: dict[str, Any], file: str = "env.yaml") -> list[Any]:
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path(file))
    return catalogue.run_values(ValuesContext(loaded.data, loaded, origins=Origins([loaded])), only=[rule_id])


def _with(**model: Any) -> dict[str, Any]:
    values = copy.deepcopy(GOOD)
    values["models"][0].update(model)
    return values


@pytest.mark.parametrize(
    ("args", "flagged", "shown"),
    [
        (["--api-key", "sk-1"], 0, "'--api-key'"),
        (["--enforce-eager", "--api-key=sk-1"], 1, "'--api-key=...'"),
        (["--api_key=sk-1"], 0, "'--api_key=...' sets --api-key to a literal key (vLLM reads underscores"),
        (["--api_key", "sk-1"], 0, "'--api_key'"),
        (["--api-k", "sk-1"], 0, "--api-k is a prefix of --api-key, which vLLM expands"),
        (["--api-key", "$(VLLM_API_KEY)", "sk-2"], 0, "'--api-key'"),  # vLLM's api_key takes a list
    ],
)
def test_a_literal_api_key_in_extra_args_is_an_error_at_its_item(
    args: list[str], flagged: int, shown: str
) -> None:
    [finding] = _run("api-key-not-inline", _with(extraArgs=args))
    assert finding.severity == "error" and finding.path == f"models[0].extraArgs[{flagged}]"
    assert shown in finding.message
    assert finding.file == "env.yaml" and finding.line is not None
    assert "sk-1" not in finding.message and "sk-2" not in finding.message  # the report leaks nothing
    assert "auth.apiKeySecret.name" in finding.suggestion


@pytest.mark.parametrize(
    "args",
    [
        ["--api-key", "$(VLLM_API_KEY)"],
        ["--api-key=$(VLLM_API_KEY)"],
        ["--api_key=$(A)$(B)"],
        ["--api-key-validation-urls", "https://example.com/user"],  # another flag (the router's)
        ["--api", "x"],  # ambiguous in vLLM (--api-key, --api-server-count): refused, not a key
        ["--enforce-eager"],
    ],
)
def test_references_and_other_flags_are_not_literal_keys(args: list[str]) -> None:
    assert _run("api-key-not-inline", _with(extraArgs=args)) == []


def test_router_and_engine_extra_args_are_read_too() -> None:
    values = copy.deepcopy(GOOD)
    values["router"] = {"extraArgs": ["--cache-threshold", "0.5", "--api-key", "sk-1"]}
    values["engine"] = {"extraArgs": ["--api-key=$(VLLM_API_KEY)"]}
    [finding] = _run("api-key-not-inline", values)
    assert finding.path == "router.extraArgs[2]" and finding.line is not None
    values["engine"] = {"extraArgs": ["--api-key=sk-1"]}
    assert {f.path for f in _run("api-key-not-inline", values)} == {
        "router.extraArgs[2]",
        "engine.extraArgs[0]",
    }


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_API_KEY",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_API_KEY",
        "DB_PASSWORD",
        "WEBHOOK_SECRET",
        "hf_token",
    ],
)
def test_a_credential_env_var_with_a_literal_value_is_an_error(name: str) -> None:
    values = _with()
    values["engine"] = {
        "extraEnv": [{"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}, {"name": name, "value": "x1"}]
    }
    [finding] = _run("secret-env-not-inline", values)
    assert finding.severity == "error" and finding.path == "engine.extraEnv[1].value"
    assert finding.file == "env.yaml" and finding.line is not None
    assert f"sets {name} to a literal value" in finding.message and "x1" not in finding.message
    assert "valueFrom.secretKeyRef" in finding.suggestion and "auth.apiKeySecret" in finding.suggestion


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "VLLM_API_KEY", "valueFrom": FROM_SECRET},
        {"name": "VLLM_API_KEY", "value": "$(ROUTER_KEY)"},  # expanded by the kubelet from another var
        {"name": "VLLM_API_KEY", "value": ""},
        {"name": "AWS_ACCESS_KEY_ID", "value": "AKIAEXAMPLE"},  # an identifier, not the secret
        {"name": "HF_HUB_DISABLE_IMPLICIT_TOKEN", "value": "1"},  # a switch about a token
        {"name": "TOKENIZERS_PARALLELISM", "value": "false"},
    ],
)
def test_secret_references_and_other_variables_pass(entry: dict[str, Any]) -> None:
    values = _with()
    values["engine"] = {"extraEnv": [entry]}
    assert _run("secret-env-not-inline", values) == []


def test_env_lists_of_the_router_and_the_curvine_subchart_are_read_too() -> None:
    values = _with()
    values["router"] = {"extraEnv": [{"name": "VLLM_API_KEY", "value": "sk-1"}]}
    values["curvine"]["worker"]["extraEnv"] = [{"name": "S3_SECRET_KEY", "value": "s"}]
    found = _run("secret-env-not-inline", values)
    assert {f.path for f in found} == {"router.extraEnv[0].value", "curvine.worker.extraEnv[0].value"}


def test_a_literal_env_secret_is_reported_once() -> None:
    """secrets-not-inline walks every value too: an env entry is left to secret-env-not-inline."""
    values = _with()
    values["engine"] = {"extraEnv": [{"name": "HF_TOKEN", "value": "hf_abc"}]}
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    found = catalogue.run_values(ValuesContext(loaded.data, loaded))
    # (offline from the Hub, as the tests are, the model's facts are the shipped ones, and model-facts-source
    # says so: not this test's concern)
    assert [f.rule for f in found if f.rule != "model-facts-source"] == ["secret-env-not-inline"]


def _unpinned() -> dict[str, Any]:
    return _with(source={"huggingface": {"tokenSecret": {"name": "hf-token", "key": "token"}}})


def test_an_unpinned_hub_model_is_a_warning_outside_production() -> None:
    [finding] = _run("model-revision-pinned", _unpinned(), "staging.yaml")
    assert finding.severity == "warning" and finding.path == "models[0].source.huggingface"
    assert (
        "when the Hub's main moves, new weights" in finding.message
        and "40-character commit SHA" in finding.message
    )
    assert finding.file == "staging.yaml" and finding.line is not None


@pytest.mark.parametrize("file", ["prod-g6e-4xlarge.yaml", "prod.yaml", "prod-x.yml"])
def test_an_unpinned_hub_model_is_an_error_in_production(file: str) -> None:
    [finding] = _run("model-revision-pinned", _unpinned(), file)
    assert finding.severity == "error" and "required in a production environment" in finding.message


@pytest.mark.parametrize("file", ["production-notes.yaml", "preprod.yaml", "myprod-x.yaml"])
def test_only_prod_star_files_are_production(file: str) -> None:
    [finding] = _run("model-revision-pinned", _unpinned(), file)
    assert finding.severity == "warning"


def test_a_branch_on_production_is_a_warning_and_a_commit_passes() -> None:
    branch = _with(source={"huggingface": {"revision": "main"}})
    [finding] = _run("model-revision-pinned", branch, "prod-g6e-4xlarge.yaml")
    assert finding.severity == "warning" and finding.path == "models[0].source.huggingface.revision"
    assert "'main' is a branch or tag" in finding.message and "a branch moves" in finding.message
    assert _run("model-revision-pinned", branch, "staging.yaml") == []  # off production a branch is a choice
    short = _with(source={"huggingface": {"revision": SHA[:12]}})
    assert _run("model-revision-pinned", short, "prod-g6e-4xlarge.yaml")[0].severity == "warning"
    assert _run("model-revision-pinned", _with(source={"huggingface": {"revision": SHA}}), "prod.yaml") == []


def test_models_from_a_claim_need_no_revision() -> None:
    claim = _with(source={"pvc": {"claimName": "weights", "path": "qwen"}})
    assert _run("model-revision-pinned", claim, "prod-g6e-4xlarge.yaml") == []


def test_any_values_layer_named_prod_makes_it_production(tmp_path: Path) -> None:
    """`kvtier validate base.yaml -f prod-overrides.yaml`: the production file is a later layer."""
    base, prod = tmp_path / "base.yaml", tmp_path / "prod-overrides.yaml"
    base.write_text(yaml.safe_dump(_unpinned(), sort_keys=False))
    prod.write_text("router:\n  replicas: 3\n")

    def severity(options: pipeline.Options) -> str:
        report, _ = pipeline.check_values(base, options)
        [finding] = [f for f in report.findings if f.rule == "model-revision-pinned"]
        assert finding.file == str(base) and finding.line is not None
        return finding.severity

    assert severity(pipeline.Options(render=False)) == "warning"
    assert severity(pipeline.Options(render=False, values=(prod,))) == "error"


def test_every_shipped_environment_pins_its_hub_models() -> None:
    for file in sorted(paths.VALUES.glob("*.yaml")):
        values = loader.load(file).data
        for model in values.get("models") or []:
            hub = (model.get("source") or {}).get("huggingface")
            if hub is not None:
                assert len(str(hub.get("revision", ""))) == 40, (file.name, model["name"])
