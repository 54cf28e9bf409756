"""`kvtier warm` against a release on the real control plane, Helm 3 and 4: values/cpu.yaml with a warm-up
list installed with `--wait` (the API server admits the hook Job and its pod under the namespace's Pod
Security; KWOK's pod-job-done stage completes it), then `kvtier warm` reads the hook from Helm's own
release record (the Secret each Helm major writes), creates its twin under a new name, waits for it and
reports. KWOK runs no container and serves no log, so the report is "no report, and why": what the warm-up
finds runs in tests/engine/test_l2_warmup.py (real engines) and tests/node (real pods)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_install import _provide_storage, _setup, chart_now, helm3  # noqa: F401 (fixtures)

from kvtier import paths
from kvtier.cluster.common.rest import Rest

ENV = paths.VALUES / "cpu.yaml"
SUPPORT = {"text": "You are the support assistant. " * 80}


@pytest.mark.parametrize("major", [3, 4])
def test_kvtier_warm_reruns_the_releases_warmup_hook(
    major: int,
    kube_cluster: Path,
    kube_rest: Rest,
    make_namespace,
    static_pvs,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    need,
) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    model = yaml.safe_load(ENV.read_text())["models"][0]["name"]
    overlay = tmp_path / "warm.yaml"
    warmup = {"prefixes": {model: {"support": SUPPORT}}, "timeoutSeconds": 120}
    overlay.write_text(yaml.safe_dump({"cache": {"warmup": warmup}}))
    helm, namespace = _setup(ENV, major, kube_cluster, make_namespace, "warm", request)
    release = f"warm{major}"
    chart = request.getfixturevalue("chart_now")  # test_install's fixture, imported above
    _provide_storage(helm, chart, release, ENV, kube_rest, static_pvs)
    helm("install", release, str(chart), "-f", str(ENV), "-f", str(overlay), "--wait", "--timeout", "5m")
    hook = f"{release}-kv-tiered-inference-warmup-{model}"
    jobs = {
        j["metadata"]["name"]: j
        for j in kube_rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    }
    assert jobs[hook]["status"].get("succeeded") == 1, jobs[hook]["status"]

    argv = [str(Path(sys.executable).with_name("kvtier")), "warm", "--release", release, "-n", namespace]
    argv += ["--kubeconfig", str(kube_cluster), "-o", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr  # no log on KWOK, so no report: never a pass
    (report,) = json.loads(done.stdout)
    assert report["model"] == model and not report["ok"]
    assert report["summary"].startswith(f"job/{report['job']} printed no report")
    twin = kube_rest.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{report['job']}")
    assert twin["status"].get("succeeded") == 1
    assert "helm.sh/hook" not in twin["metadata"]["annotations"]
    ours = twin["spec"]["template"]["spec"]["containers"][0]
    theirs = jobs[hook]["spec"]["template"]["spec"]["containers"][0]
    assert ours["command"] == theirs["command"] and ours["volumeMounts"] == theirs["volumeMounts"]

    wrong = subprocess.run([*argv[:3], "nosuch", *argv[4:]], capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and "no Helm release 'nosuch'" in wrong.stderr, wrong.stderr
    other = subprocess.run([*argv, "--model", "other"], capture_output=True, text=True, timeout=120)
    assert other.returncode == 2 and f"warms {model} only" in other.stderr, other.stderr
