"""The options every command shares (kvtier.cliopts): the kubeconfig, context and namespace found as
kubectl finds them, `-o/--output`, and the old spellings that still work with a warning. The cluster
commands are run against a stand-in API server on 127.0.0.1 that records what it was asked."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from test_kvcheck_fakes import as_json, serve

from kvtier import cli, cliopts, paths
from kvtier.errors import UserError

EMPTY_PODS = as_json({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})


def kubeconfig(server: str, current: str = "c1", contexts: dict[str, str | None] | None = None) -> str:
    """A kubeconfig text: each context (name -> namespace or None) on one cluster at `server`."""
    contexts = contexts if contexts is not None else {"c1": "fromctx"}
    entries = [
        {"name": name, "context": {"cluster": "k", "user": "u", **({"namespace": ns} if ns else {})}}
        for name, ns in contexts.items()
    ]
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": current,
            "contexts": entries,
            "clusters": [{"name": "k", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
        }
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of its own and no $KUBECONFIG: ~/.kube/config is whatever the test writes there."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    (tmp_path / ".kube").mkdir()
    return tmp_path


def args(**given: str | None) -> argparse.Namespace:
    return argparse.Namespace(**{"kubeconfig": None, "context": None, "namespace": None, **given})


@pytest.mark.parametrize("command", ["smoke", "bench"])
def test_the_readme_commands_reach_the_cluster_through_home_kube_config(
    command: str, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README "Install on a cluster": `kvtier smoke|bench --namespace inference --release kv`."""
    with serve({("GET", "/api/v1/namespaces/inference/pods"): EMPTY_PODS}) as api:
        (home / ".kube" / "config").write_text(kubeconfig(api.url))
        extra = ["--out", str(tmp_path / "out")] if command == "bench" else []
        code = cli.main([command, "--namespace", "inference", "--release", "kv", *extra])
    err = capsys.readouterr().err
    assert ("GET", "/api/v1/namespaces/inference/pods") in api.seen
    assert code == 2 and "no Ready router pod in namespace inference" in err, err


def test_the_namespace_defaults_to_the_contexts_then_default(home: Path) -> None:
    config = home / ".kube" / "config"
    config.write_text(kubeconfig("http://127.0.0.1:1", contexts={"c1": "fromctx", "bare": None}))
    assert cliopts.resolve(args()).namespace == "fromctx"
    assert cliopts.resolve(args(context="bare")).namespace == "default"
    assert cliopts.resolve(args(namespace="given")).namespace == "given"
    found = cliopts.resolve(args())
    assert (found.kubeconfig, found.context, found.given) == (str(config), "c1", None)


def test_kubeconfig_list_merges_as_kubectl_first_file_wins(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(kubeconfig("http://127.0.0.1:1", current="one", contexts={"one": "ns-a", "both": "a"}))
    second.write_text(kubeconfig("http://127.0.0.1:2", current="two", contexts={"two": "ns-b", "both": "b"}))
    (home / ".kube" / "config").write_text(kubeconfig("http://127.0.0.1:3", contexts={"c1": "home"}))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing.yaml'}:{second}")
    found = cliopts.resolve(args())
    assert (found.context, found.namespace) == ("one", "ns-a")  # current-context: the first file's
    assert cliopts.resolve(args(context="two")).namespace == "ns-b"  # contexts of every file
    assert cliopts.resolve(args(context="both")).namespace == "a"  # the first file to name it wins
    assert found.kubeconfig == f"{first}:{second}"  # missing files are left out, as kubectl does
    # --kubeconfig beats $KUBECONFIG
    assert cliopts.resolve(args(kubeconfig=str(second))).context == "two"


def test_missing_and_broken_kubeconfigs_are_named(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UserError, match=r"~/.kube/config does not exist"):
        cliopts.resolve(args())
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nowhere.yaml"))
    with pytest.raises(UserError, match=r"\$KUBECONFIG \(.*nowhere.yaml\) names no existing file"):
        cliopts.resolve(args())
    broken = tmp_path / "broken.yaml"
    broken.write_text("contexts: [a, b]\n")
    with pytest.raises(UserError, match=r"broken.yaml: not a usable kubeconfig \(contexts"):
        cliopts.resolve(args(kubeconfig=str(broken)))
    with pytest.raises(UserError, match=r"--kubeconfig .*absent.yaml: no such file"):
        cliopts.resolve(args(kubeconfig=str(tmp_path / "absent.yaml")))
    (home / ".kube" / "config").write_text(kubeconfig("http://127.0.0.1:1"))
    monkeypatch.delenv("KUBECONFIG")
    with pytest.raises(UserError, match=r"--context nope: no such context in .* \(contexts: c1\)"):
        cliopts.resolve(args(context="nope"))


def test_old_spellings_still_work_and_warn(capsys: pytest.CaptureFixture[str]) -> None:
    parsed = cli.build_parser().parse_args(["validate", "--kube-context", "prod", "-n", "inference"])
    assert (parsed.context, parsed.namespace) == ("prod", "inference")
    assert "--kube-context is deprecated and will be removed; use --context" in capsys.readouterr().err
    for command in (["smoke"], ["bench"], ["preflight", "f.yaml"], ["cluster", "status"]):
        parsed = cli.build_parser().parse_args([*command, "--json"])
        assert parsed.output == "json", command
        assert "--json is deprecated and will be removed; use --output json" in capsys.readouterr().err
    parsed = cli.build_parser().parse_args(["unittest-compare", "chart", "--json", "cases.json"])
    assert parsed.json_file == Path("cases.json") and parsed.output == "table"
    assert "use --json-file" in capsys.readouterr().err
    parsed = cli.build_parser().parse_args(["preflight", "f.yaml", "--context", "prod"])
    assert parsed.context == "prod" and not capsys.readouterr().err  # the new spelling: no warning


def test_every_reporting_command_takes_output_json() -> None:
    parser = cli.build_parser()
    for command in (
        ["validate"],
        ["plan"],
        ["smoke"],
        ["bench"],
        ["preflight", "f.yaml"],
        ["cluster", "status"],
        ["unittest-compare", "chart"],
        ["lint"],
        ["package"],
    ):
        assert parser.parse_args([*command, "-o", "json"]).output == "json", command
        assert parser.parse_args([*command, "--output", "table"]).output == "table", command


def test_validate_without_cluster_flags_reads_no_kubeconfig(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Both places kubectl would look hold something unreadable: reading either is an exit 2.
    (home / ".kube" / "config").write_text("{not: [a kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(home / ".kube" / "config"))
    code = cli.main(["validate", "--no-render", "-o", "json", str(paths.VALUES / "cpu.yaml")])
    captured = capsys.readouterr()
    assert code in (0, 1) and "kubeconfig" not in captured.err, captured.err
    assert json.loads(captured.out)["environments"][0]["file"].endswith("cpu.yaml")
    # ... and with --context it does read it, and says what is wrong with it
    assert cli.main(["validate", "--no-render", "--context", "c1", str(paths.VALUES / "cpu.yaml")]) == 2
    assert "not a usable kubeconfig" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "extra", "expected"),
    [
        ("smoke", ["--l2", "on", "--model", "m", "-o", "json"], 1),  # the cross-pod check ran, and failed
        ("bench", ["--model", "m"], 2),  # the first request stopped it
    ],
)
def test_url_flags_need_no_kubeconfig(
    command: str,
    extra: list[str],
    expected: int,
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (home / ".kube" / "config").write_text("{not: [a kubeconfig")
    urls = ["--replica-url", "http://127.0.0.1:1", "--replica-url", "http://127.0.0.1:1"]
    out = ["--out", str(tmp_path / "out")] if command == "bench" else []
    code = cli.main([command, *urls, *extra, *out])
    captured = capsys.readouterr()
    assert code == expected and "kubeconfig" not in captured.err, captured.err
    assert "refused" in captured.out + captured.err


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "https://router.example:443/", "http://[::1]:1"])
def test_http_url_takes_what_urllib_can_send_to(url: str) -> None:
    assert cliopts.http_url(url) == url


@pytest.mark.parametrize(
    "url", ["", "/v1", "127.0.0.1:8000", "ftp://h", "http://", "http://h:x", " http://h"]
)
def test_http_url_refuses_the_rest_at_the_flag(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Before, an empty --replica-url reached the request as '/v1/models' and the error named neither.
    with pytest.raises(SystemExit) as exited:
        cli.main(["bench", "--replica-url", url, "--replica-url", "http://127.0.0.1:1"])
    assert exited.value.code == 2
    assert f"argument --replica-url: {url!r} is not an http(s) URL" in capsys.readouterr().err
