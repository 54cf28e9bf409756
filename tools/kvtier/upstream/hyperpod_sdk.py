"""AWS's SageMaker HyperPod SDK (PyPI `sagemaker-hyperpod`), reached in its own venv.

The SDK pins pytest, ruff, click and requests to versions kvtier's .venv does not use, so it lives in
.venv-hyperpod (toolchain/side-venv.sh hyperpod-sdk, versions in toolchain/versions.env) and is asked through
hyperpod_sdk_worker.py in a subprocess. Two uses: validate rendered InferenceEndpointConfig specs with the
SDK's own Pydantic models, and hand its JSON schemas to hyperpod_crd for the CRDs the tests install.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvtier import paths, toolchain
from kvtier.cluster.common import binaries
from kvtier.errors import UserError

WORKER = Path(__file__).with_name("hyperpod_sdk_worker.py")
INSTALL_HINT = "run `make hyperpod-sdk` (toolchain/side-venv.sh hyperpod-sdk)"
TIMEOUT = 180.0  # seconds; importing the SDK's models takes about a second


def python() -> Path:
    """The SDK venv's interpreter: $KVTIER_HYPERPOD_SDK_PYTHON, else .venv-hyperpod/bin/python."""
    env = os.environ.get("KVTIER_HYPERPOD_SDK_PYTHON")
    return Path(env) if env else paths.ROOT / ".venv-hyperpod" / "bin" / "python"


def pinned_version() -> str:
    return toolchain.versions().get("HYPERPOD_SDK_VERSION", "?")


def missing() -> str:
    """Why the SDK cannot be used ("" when it can)."""
    if not python().exists():
        return f"sagemaker-hyperpod {pinned_version()} is not installed ({python()} missing): {INSTALL_HINT}"
    return ""


def _call(command: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    why = missing()
    if why:
        raise UserError(why)
    try:
        done = subprocess.run(
            [str(python()), str(WORKER), command],
            input=json.dumps(payload or {}),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UserError(f"the HyperPod SDK ({python()}) did not answer: {error}; {INSTALL_HINT}") from error
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"the HyperPod SDK ({python()}) failed on `{command}`: {last}; {INSTALL_HINT}")
    return json.loads(done.stdout)


@functools.cache
def schemas() -> dict[str, Any]:
    """{"versions": {distribution: version}, "kinds": {kind: {"spec", "status", "model"}}} from the SDK."""
    return _call("schemas")


@dataclass(frozen=True)
class Problem:
    path: str  # dotted, below the object (spec.kvCacheSpec.l2CacheSpec.x)
    message: str
    unknown: bool  # a field the SDK's model does not have (refused or ignored by it), not a wrong value


def _verdicts_dir() -> Path:
    """Where the SDK's verdicts are kept, by spec: the SDK is deterministic, and its import costs about
    1.7 s per call on two cores, most of a `kvtier validate` run with HyperPod files.
    $KVTIER_HYPERPOD_VERDICTS moves it (the benchmark times a cold run in an empty one)."""
    if os.environ.get("KVTIER_HYPERPOD_VERDICTS"):
        return Path(os.environ["KVTIER_HYPERPOD_VERDICTS"])
    return binaries.cache_dir() / "hyperpod-sdk-verdicts"


@functools.cache
def _judge_identity() -> str:
    """What a verdict depends on besides the spec: the SDK venv (its path names the pinned versions) and
    the worker's code."""
    return f"{python().resolve()}\n{hashlib.sha256(WORKER.read_bytes()).hexdigest()}"


def _verdict_file(spec: dict[str, Any]) -> Path:
    text = _judge_identity() + "\n" + json.dumps(spec, sort_keys=True, default=str)
    return _verdicts_dir() / f"{hashlib.sha256(text.encode()).hexdigest()}.json"


def _read_verdict(file: Path) -> list[dict[str, Any]] | None:
    try:
        verdict = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, list) else None


def _write_verdict(file: Path, errors: list[dict[str, Any]]) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        partial = file.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(errors))
        partial.replace(file)  # atomic: a concurrent run reads a whole verdict or none
    except OSError:
        pass  # an unwritable cache only costs the next run the SDK call


def validate_specs(specs: list[dict[str, Any]]) -> list[list[Problem]]:
    """Each spec through the SDK's `_HPEndpoint` model; one list of problems per spec. Verdicts already
    given for an identical spec by the same SDK and worker are read back; the rest go in one call."""
    files = [_verdict_file(spec) for spec in specs]
    known = {file: _read_verdict(file) for file in set(files)}
    todo = {file: spec for file, spec in zip(files, specs, strict=True) if known[file] is None}
    if todo:
        answer = _call("validate", {"specs": list(todo.values())})
        for file, errors in zip(todo, answer["results"], strict=True):
            known[file] = errors
            _write_verdict(file, errors)
    return [
        [
            Problem(
                ".".join(["spec", *(str(step) for step in e["loc"])]),
                e["msg"],
                e["type"] in ("extra_forbidden", "extra_ignored"),
            )
            for e in known[file] or []
        ]
        for file in files
    ]
