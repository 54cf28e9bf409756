"""The umbrella's router, as the chart renders it for values/cpu.yaml, on the real node: the pinned
vllm-router (the image built here from PyPI) starts with the chart's command line, probes and security
context, and its Kubernetes discovery finds engine pods through the real API server with the chart's RBAC.

The "engine" here is a stand-in, so that discovery and RBAC are checked alone and in seconds: a pod with
the engine's rendered selector labels whose tiny HTTP server answers the router's health checks; no
completion goes through it. test_umbrella_cpu.py runs the real engines behind the same router.
"""

from __future__ import annotations

import json
import time

ROUTER_TEMPLATES = [f"router-{t}" for t in ("serviceaccount", "role", "rolebinding", "deployment", "service")]
STAND_IN_SERVER = """
import http.server, json
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("GET", self.path, flush=True)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({}).encode())
http.server.HTTPServer(("", 8000), Health).serve_forever()
"""


def _selector(deployment: dict) -> dict[str, str]:
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    labels = []
    for arg in args[args.index("--selector") + 1 :]:
        if arg.startswith("--"):
            break
        labels.append(arg)
    return dict(label.split("=", 1) for label in labels)


def _log_until(kube, namespace: str, target: str, text: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    log = ""
    while time.monotonic() < deadline:
        log = kube.kubectl("logs", "-n", namespace, target, check=False)
        if text in log:
            return log
        time.sleep(1)
    raise AssertionError(f"{target} did not log {text!r} within {timeout:.0f}s; its log:\n{log[-3000:]}")


def test_the_charts_router_discovers_engine_pods_through_the_api_server(
    kube, real_cluster, namespace, render_umbrella
) -> None:
    ns = namespace("router")
    objects = render_umbrella(ns, ROUTER_TEMPLATES, {"router": real_cluster.images["router"]})
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    kube.kubectl(
        "apply", "-n", ns, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    router = f"deployment/{deployment['metadata']['name']}"
    # Started with the chart's command line, as the chart's non-root user: discovery begins, no engine yet.
    _log_until(kube, ns, router, "Starting K8s service discovery")
    assert "Router ready | workers: []" in _log_until(kube, ns, router, "Router ready")

    stand_in = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "engine-stand-in", "labels": _selector(deployment)},
        "spec": {
            "containers": [
                {
                    "name": "health",
                    "image": real_cluster.images["python"],
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", STAND_IN_SERVER],
                    "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 1},
                }
            ]
        },
    }
    kube.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(stand_in))
    kube.kubectl("wait", "-n", ns, "--for=condition=Ready", "pod/engine-stand-in", "--timeout=120s")
    ip = kube.kubectl("get", "pod", "engine-stand-in", "-n", ns, "-o", "jsonpath={.status.podIP}")
    # The watch through the API server (the chart's Role: list/watch pods) brought the pod's address...
    log = _log_until(kube, ns, router, f"Added worker: http://{ip}:8000")
    assert "Adding pod: engine-stand-in" in log
    # ...the router health-checks it from its own pod, and its readiness probe (/readiness) turns true.
    assert "GET /health" in _log_until(kube, ns, "pod/engine-stand-in", "GET /health")
    kube.kubectl("wait", "-n", ns, "--for=condition=Available", router, "--timeout=120s")
    status = json.loads(
        kube.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=router", "-o", "json")
    )
    (pod,) = status["items"]
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_without_the_charts_role_binding_the_api_server_refuses_discovery(
    kube, real_cluster, namespace, render_umbrella
) -> None:
    """The other half of "RBAC as rendered": the chart's RoleBinding is what lets discovery list pods."""
    ns = namespace("router-norbac")
    objects = render_umbrella(ns, ROUTER_TEMPLATES, {"router": real_cluster.images["router"]})
    objects = [o for o in objects if o["kind"] != "RoleBinding"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    kube.kubectl(
        "apply", "-n", ns, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    log = _log_until(kube, ns, f"deployment/{deployment['metadata']['name']}", "pods is forbidden")
    assert f'User "system:serviceaccount:{ns}:{account}"' in log
