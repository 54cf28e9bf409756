"""`kvtier validate --vllm`: the rendered engine args of values files judged by the pinned vLLM (one probe
process for all files), each refusal traced to the values key that renders it."""

from __future__ import annotations

from pathlib import Path

import yaml

from kvtier import paths
from kvtier.validate import pipeline
from kvtier.validate.findings import OK, VLLM


def _variant(work: Path, name: str, **model: object) -> Path:
    values = yaml.safe_load((paths.VALUES / "cpu.yaml").read_text())
    values["models"][0].update(model)
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def _kvaware_variant(work: Path, name: str, **model: object) -> Path:
    """values/cpu.yaml under kvaware routing: the engines are a StatefulSet."""
    values = yaml.safe_load(_variant(work, name, **model).read_text())
    values.setdefault("routing", {})["strategy"] = "kvaware"
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def _native_variant(work: Path, name: str, **cache: object) -> Path:
    values = yaml.safe_load((paths.VALUES / "prod-native-g6e-4xlarge.yaml").read_text())
    values["cache"].update(cache)
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def test_vllm_judges_the_engine_args_of_every_file(work: Path) -> None:
    files = [
        paths.VALUES / "cpu.yaml",
        _variant(work, "zero-seqs", extraArgs=["--max_num_seqs=0"]),  # vLLM's spelling, not the flag's
        _variant(work, "bad-choice", extraArgs=["--enforce-eager", "--kv-cache-dtype", "bogus"]),
        paths.VALUES / "prod-native-g6e-4xlarge.yaml",
        _native_variant(work, "native-chunk", chunkSize=200),
        _kvaware_variant(work, "kvaware-zero-seqs", extraArgs=["--max-num-seqs", "0"]),
    ]
    options = pipeline.Options(helm_majors=(3,), minors=("1.35",), vllm=True)
    good, zero, choice, native, uneven, kvaware = pipeline.validate(files, options)

    assert good.checks[VLLM].status == OK, good.checks[VLLM]
    assert "1 engine(s)" in good.checks[VLLM].detail
    assert native.checks[VLLM].status == OK, native.checks[VLLM]  # the offloading config down to its tiers
    # vLLM's offloading config builder refuses a chunk its KV block size does not divide: named at the key.
    [refusal] = [f for f in uneven.findings if f.check == VLLM]
    assert refusal.rule == "vllm.kv-offloading" and refusal.path == "cache.chunkSize", refusal
    assert "must be a multiple of the GPU KV cache block size" in refusal.message and refusal.line is not None
    for report, flag, item in ((zero, "--max-num-seqs", 0), (choice, "--kv-cache-dtype", 1)):
        [finding] = [f for f in report.findings if f.check == VLLM]
        assert finding.message.startswith(flag), finding
        # the list item that sets it, however it is spelled
        assert finding.path == f"models[0].extraArgs[{item}]" and finding.line is not None, finding
        assert finding.subject.startswith("Deployment/"), finding
        assert pipeline.exit_code([report]) == 1
    # kvaware routing runs the engines as a StatefulSet: judged all the same
    [finding] = [f for f in kvaware.findings if f.check == VLLM]
    assert finding.subject.startswith("StatefulSet/") and finding.path == "models[0].extraArgs[0]", finding


def test_without_the_flag_the_row_says_it_was_not_asked() -> None:
    [report] = pipeline.validate(
        [paths.VALUES / "cpu.yaml"], pipeline.Options(helm_majors=(3,), minors=("1.35",))
    )
    assert "not asked" in report.checks[VLLM].detail
