"""The input files the CLI fuzz test (test_cli_fuzz.py) hands to kvtier: good ones, and each way a
user's file can be bad. Made once per run in a sandbox folder; every path is absolute.

Unreadable files: the tests run as root, and root reads a mode-000 file anyway, so the unreadable
kinds are a FIFO (a plain read would block forever), a directory, a symlink loop and a path below a
regular file (ENOTDIR).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from kvtier import paths

CLOSED = "http://127.0.0.1:1"  # loopback, nothing listens: every connection is refused at once


@dataclass
class Inputs:
    root: Path
    values: dict[str, Path] = field(default_factory=dict)
    configs: dict[str, Path] = field(default_factory=dict)  # Hugging Face config.json stand-ins
    kubeconfigs: dict[str, Path] = field(default_factory=dict)
    unreadable: dict[str, Path] = field(default_factory=dict)  # kinds of path no command can read
    good_kubeconfig: Path = Path()


def _unreadable(root: Path) -> dict[str, Path]:
    folder = root / "unreadable"
    folder.mkdir()
    fifo = folder / "fifo.yaml"
    os.mkfifo(fifo)
    loop = folder / "loop.yaml"
    loop.symlink_to(loop)
    plain = folder / "plain.txt"
    plain.write_text("x\n")
    (folder / "dir.yaml").mkdir()
    return {
        "fifo": fifo,
        "directory": folder / "dir.yaml",
        "symlink-loop": loop,
        "below-a-file": plain / "child.yaml",
        "missing": folder / "missing.yaml",
    }


def _write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _values(folder: Path) -> dict[str, Path]:
    good = (paths.VALUES / "cpu.yaml").read_text()
    deep = "a: " + "[" * 5000 + "]" * 5000 + "\n"
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    cases: dict[str, str | bytes] = {
        "good-cpu": good,
        "good-prod": (paths.VALUES / "prod-g6e-4xlarge.yaml").read_text(),
        "malformed": "models: [a\ncache: {\n",
        "tab-indent": "cache:\n\tchunkSize: 256\n",
        "duplicate-key": "cache: {}\ncache: {}\n",
        "top-level-list": "- a\n- b\n",
        "scalar": "42\n",
        "empty": "",
        "comments-only": "# nothing\n",
        "two-documents": "a: 1\n---\nb: 2\n",
        "models-wrong-type": "models: 5\n",
        "cache-wrong-type": "cache: lots\nmodels: []\n",
        "model-fields-wrong": good.replace("replicas:", "replicas: two #"),
        "zeros": "cache:\n  chunkSize: 0\nmodels:\n  - name: m\n    model: Qwen/Qwen2-7B-Instruct\n"
        "    replicas: 0\n    gpusPerReplica: 0\n    gpuMemoryUtilization: 0\n",
        "negatives": "cache:\n  chunkSize: -256\n  l1: {size: -4}\nmodels:\n  - name: m\n"
        "    model: Qwen/Qwen2-7B-Instruct\n    replicas: -2\n",
        "huge": "cache:\n  chunkSize: 1e308\n  l2:\n    enabled: true\n"
        "    claim: {size: 99999999999999999999Pi}\nmodels:\n  - name: m\n"
        "    model: Qwen/Qwen2-7B-Instruct\n    replicas: 10000000000000000000000\n",
        "unknown-model": good.replace("Qwen/Qwen2-0.5B-Instruct", "nobody/no-such-model"),
        "non-utf8": b"cache:\n  chunkSize: \xff\xfe\xfd\n",
        "latin1": "models:\n  - name: caf\xe9\n".encode("latin-1"),
        "nul-bytes": b"models: []\n\x00\x00",
        "too-large": "# padding\n" * 400_000,
        "deep-nesting": deep,
        "alias-bomb": bomb,
        "odd-keys": "? [a, b]\n: 1\n",
        "bad-timestamp": "cache: 2026-13-45T99:99:99\n",
        "bad-tag": "cache: !!python/object:os.system echo\n",
    }
    return {name: _write(folder, f"{name}.yaml", content) for name, content in cases.items()}


def _configs(folder: Path) -> dict[str, Path]:
    good = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 10}
    cases: dict[str, str | bytes] = {
        "good": json.dumps(good),
        "multimodal": json.dumps({"text_config": good}),
        "text-config-string": json.dumps({"text_config": "gpt"}),
        "not-json": "{num_hidden_layers: 2",
        "json-list": "[1, 2]",
        "json-string": '"config"',
        "empty": "",
        "non-utf8": b'{"hidden_size": "\xff"}',
        "deep-nesting": "[" * 100_000 + "]" * 100_000,
        "nan": '{"num_hidden_layers": NaN, "num_attention_heads": 4, "hidden_size": 64}',
        "missing-keys": json.dumps({"hidden_size": 64}),
    }
    for key in ("num_hidden_layers", "num_attention_heads", "hidden_size", "num_key_value_heads", "head_dim"):
        for label, value in (
            ("zero", 0),
            ("negative", -3),
            ("string", "8"),
            ("float", 2.5),
            ("huge", 10**40),
        ):
            cases[f"{key}-{label}"] = json.dumps({**good, key: value})
    cases["params-huge"] = json.dumps({**good, "num_parameters": 1e308})
    cases["params-bool"] = json.dumps({**good, "num_parameters": True})
    cases["layer-types-number"] = json.dumps({**good, "sliding_window": 8, "layer_types": 5})
    cases["sliding-window-text"] = json.dumps({**good, "sliding_window": "8k"})
    cases["dtype-number"] = json.dumps({**good, "torch_dtype": 16})
    return {name: _write(folder, f"{name}.json", content) for name, content in cases.items()}


def kubeconfig_text(server: str, **changes: object) -> str:
    config: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "fuzz",
        "contexts": [{"name": "fuzz", "context": {"cluster": "c", "user": "u", "namespace": "fuzz-ns"}}],
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }
    config.update(changes)
    return json.dumps(config)


def _kubeconfigs(folder: Path) -> dict[str, Path]:
    cases: dict[str, str | bytes] = {
        "closed-port": kubeconfig_text(CLOSED),
        "closed-port-tls": kubeconfig_text(CLOSED.replace("http:", "https:")),
        "malformed": "clusters: [\n",
        "empty": "",
        "list": "- a\n",
        "contexts-number": kubeconfig_text(CLOSED, contexts=5),
        "contexts-unnamed": kubeconfig_text(CLOSED, contexts=[{"context": {}}]),
        "no-current-context": kubeconfig_text(CLOSED, **{"current-context": ""}),
        "current-context-missing": kubeconfig_text(CLOSED, **{"current-context": "gone"}),
        "cluster-without-server": kubeconfig_text(CLOSED, clusters=[{"name": "c", "cluster": {}}]),
        "clusters-string": kubeconfig_text(CLOSED, clusters="c"),
        "users-missing": kubeconfig_text(CLOSED, users=[]),
        "ca-file-missing": kubeconfig_text(
            CLOSED.replace("http:", "https:"),
            clusters=[
                {"name": "c", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": "/no/ca"}}
            ],
        ),
        "server-not-a-url": kubeconfig_text("not a url"),
        "non-utf8": b"apiVersion: v1\ncurrent-context: \xff\n",
    }
    return {name: _write(folder, f"{name}.kubeconfig", content) for name, content in cases.items()}


def make(root: Path) -> Inputs:
    made = Inputs(root)
    for name in (
        "values",
        "configs",
        "kubeconfigs",
        "home-bad/.kube",
        "home-good/.kube",
        "home-none",
        "cache",
    ):
        (root / name).mkdir(parents=True)
    made.values = _values(root / "values")
    made.configs = _configs(root / "configs")
    made.kubeconfigs = _kubeconfigs(root / "kubeconfigs")
    made.unreadable = _unreadable(root)
    made.good_kubeconfig = made.kubeconfigs["closed-port"]
    (root / "home-bad" / ".kube" / "config").write_text("{not: [a kubeconfig\n")
    (root / "home-good" / ".kube" / "config").write_text(kubeconfig_text(CLOSED))
    return made
