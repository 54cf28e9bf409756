"""Reach a release in a cluster: its Ready router, engine and Curvine master pods, their ports, the L2
path of the engines, and port-forwards to them (kvtier.smoke.portforward) that smoke and bench use.

Selectors default to the umbrella chart's labels (`app.kubernetes.io/instance=<release>` plus
`app.kubernetes.io/component=router|engine|master`); HyperPod engines are labelled `app=<endpoint>`,
so pass --engine-selector for them.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier import cliopts
from kvtier.errors import UserError

L2_URL_ENV = "LMCACHE_REMOTE_URL"
FS_SCHEME = "fs://"
# HyperPod InProcess with the chart's L2 plugin: its directory is a key of LMCACHE_EXTRA_CONFIG (JSON).
EXTRA_CONFIG_ENV = "LMCACHE_EXTRA_CONFIG"
PLUGIN_BASE_PATH = "remote_storage_plugin.kvtier_l2.base_path"
L2_VOLUME = "l2cache"  # the umbrella chart's L2 volume name
API_KEY_ENV = "VLLM_API_KEY"  # the key vLLM requires on /v1 (auth.apiKeySecret)


@dataclass(frozen=True)
class PodPort:
    pod: str
    port: int
    l2_path: str | None = None  # the engine's filesystem L2 directory (see l2_path)
    container: str | None = None
    api_key: tuple[str, str] | str | None = None  # VLLM_API_KEY: (Secret, key) or a literal value


def default_selector(release: str, component: str) -> str:
    return f"app.kubernetes.io/instance={release},app.kubernetes.io/component={component}"


def is_ready(pod: Any) -> bool:
    conditions = (pod.status.conditions or []) if pod.status else []
    return pod.status.phase == "Running" and any(c.type == "Ready" and c.status == "True" for c in conditions)


def _port(pod: Any, names: tuple[str, ...]) -> tuple[int, str]:
    """The container port with one of `names` (in that order), else the first declared one."""
    declared = [(p, c.name) for c in pod.spec.containers for p in (c.ports or [])]
    for name in names:
        for port, container in declared:
            if port.name == name:
                return int(port.container_port), container
    if declared:
        return int(declared[0][0].container_port), declared[0][1]
    raise UserError(f"pod {pod.metadata.name} declares no container port; cannot reach it")


def _plugin_base_path(value: str | None) -> str | None:
    try:
        extra = json.loads(value or "")
    except json.JSONDecodeError:
        return None
    path = extra.get(PLUGIN_BASE_PATH) if isinstance(extra, dict) else None
    return path if isinstance(path, str) and path.startswith("/") else None


def l2_path(pod: Any, container: str) -> str | None:
    """The engine's filesystem L2 directory on HyperPod's patched pods: the chart's L2 plugin's base_path in
    LMCACHE_EXTRA_CONFIG, or LMCACHE_REMOTE_URL `fs://host:port/path/`; else the mount of the chart's
    `l2cache` volume; None when the pod has no L2."""
    for c in pod.spec.containers:
        if c.name != container:
            continue
        for env in c.env or []:
            if env.name == EXTRA_CONFIG_ENV and (path := _plugin_base_path(env.value)):
                return path
            if env.name == L2_URL_ENV and (env.value or "").startswith(FS_SCHEME):
                rest = env.value[len(FS_SCHEME) :]
                return "/" + rest.split("/", 1)[1] if "/" in rest else None
        for mount in c.volume_mounts or []:
            if mount.name == L2_VOLUME:
                return str(mount.mount_path)
    return None


def api_key_source(pod: Any, container: str) -> tuple[str, str] | str | None:
    """Where the container's VLLM_API_KEY comes from: (Secret name, key), a literal, or None (no key)."""
    for c in pod.spec.containers:
        for env in (c.env or []) if c.name == container else []:
            if env.name != API_KEY_ENV:
                continue
            ref = env.value_from.secret_key_ref if env.value_from else None
            return (ref.name, ref.key) if ref else env.value
    return None


def read_api_key(api: Any, namespace: str, source: tuple[str, str] | str | None) -> str | None:
    """The engines' API key, read from its Secret as the pods get it (needs `get secrets`)."""
    if not isinstance(source, tuple):
        return source
    import base64

    name, key = source
    try:
        data = api.read_namespaced_secret(name, namespace).data or {}
    except Exception as error:  # forbidden or missing: say which Secret and how to pass the key instead
        why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(
            f"the engines require an API key from Secret {namespace}/{name} (key {key!r}), which could not "
            f"be read ({why}); grant `get secrets` or export {API_KEY_ENV} and retry"
        ) from None
    if key not in data:
        raise UserError(f"Secret {namespace}/{name} has no key {key!r} (auth.apiKeySecret.key); add it")
    return base64.b64decode(data[key]).decode()


def find(
    api: Any, namespace: str, selector: str, port_names: tuple[str, ...], what: str, optional: bool = False
) -> list[PodPort]:
    """The Ready pods `selector` matches; none at all is an error unless `optional` (a part the release
    may leave out, such as Curvine in values/cpu.yaml), while pods that exist but are not Ready always are."""
    pods = api.list_namespaced_pod(namespace, label_selector=selector).items
    if not pods and optional:
        return []
    ready = sorted((p for p in pods if is_ready(p)), key=lambda p: p.metadata.name)
    if not ready:
        raise UserError(
            f"no Ready {what} pod in namespace {namespace} matches {selector!r} "
            f"({len(pods)} found, none Ready); check `kubectl get pods -n {namespace} -l {selector}`"
        )
    found = []
    for pod in ready:
        port, container = _port(pod, port_names)
        found.append(
            PodPort(
                pod.metadata.name, port, l2_path(pod, container), container, api_key_source(pod, container)
            )
        )
    return found


def exec_json(api: Any, namespace: str, target: PodPort, command: list[str]) -> dict[str, Any]:
    """Run `command` in the pod (through the API server) and parse the last JSON line it prints."""
    from kubernetes.stream import stream

    output = stream(
        api.connect_get_namespaced_pod_exec,
        target.pod,
        namespace,
        container=target.container,
        command=command,
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    for line in reversed(str(output).strip().splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise UserError(f"{target.pod}: `{command[0]}` printed no JSON result: {str(output)[-300:]}")


@dataclass
class Selectors:
    router: str
    engine: str
    curvine: str | None  # None: no Curvine in this release (or not checked)

    @classmethod
    def for_release(cls, release: str) -> Selectors:
        return cls(
            default_selector(release, "router"),
            default_selector(release, "engine"),
            default_selector(release, "master"),
        )


@dataclass
class Reached:
    """Local URLs (port-forwards) for a release's parts, and how to run l2-files in an engine pod."""

    router: str
    replicas: list[str]
    curvine: str | None
    l2_path: str | None
    l2_files: Callable[[], dict[str, Any]] | None
    routers: list[str] = field(default_factory=list)  # every router pod (`every_pod`), router first


@contextmanager
def reach(
    api: Any, namespace: str, selectors: Selectors, kvcheck_source: str, every_pod: bool = False
) -> Iterator[Reached]:
    """Port-forward to one router pod, two engine pods and the Curvine master; close them after.
    `every_pod`: to every router and engine pod (the load benchmark drives each router replica, as the
    router Service spreads connections over them, and reads every engine's counters)."""
    from kvtier.podscripts import kvcheck
    from kvtier.smoke.portforward import forward

    routers = find(api, namespace, selectors.router, ("http",), "router")
    engines = find(api, namespace, selectors.engine, ("http",), "engine")
    # A key in the environment wins (as vLLM's own clients read theirs), else the one the engines get.
    if not os.environ.get(API_KEY_ENV):
        kvcheck.API_KEY = read_api_key(api, namespace, engines[0].api_key)
    masters = (
        find(api, namespace, selectors.curvine, ("web",), "Curvine master", optional=True)
        if selectors.curvine
        else []
    )
    with ExitStack() as stack:
        router_pods, engine_pods = (routers, engines) if every_pod else (routers[:1], engines[:2])
        routed = [stack.enter_context(forward(api, namespace, r.pod, r.port)) for r in router_pods]
        replicas = [stack.enter_context(forward(api, namespace, e.pod, e.port)) for e in engine_pods]
        curvine = (
            stack.enter_context(forward(api, namespace, masters[0].pod, masters[0].port)) if masters else None
        )
        path = engines[0].l2_path

        def l2_files() -> dict[str, Any]:
            assert path is not None
            command = ["python3", "-c", kvcheck_source, "l2-files", "--dir", path]
            return exec_json(api, namespace, engines[0], command)

        yield Reached(routed[0], replicas, curvine, path, l2_files if path else None, routed)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `kvtier smoke` and `kvtier bench` share to reach a release in a cluster."""
    group = parser.add_argument_group(
        "against a cluster (the default without URL flags; pods reached through API server port-forwards)"
    )
    cliopts.add_cluster(group)
    group.add_argument("--release", default="kvtier", help="Helm release name (selects its pods)")
    group.add_argument("--router-selector", help="label selector of router pods (default: the chart's)")
    group.add_argument("--engine-selector", help="label selector of engine pods (HyperPod: app=<endpoint>)")
    group.add_argument("--curvine-selector", help="label selector of Curvine master pods ('' = none)")


CLUSTER_FLAGS = (
    "kubeconfig",
    "context",
    "namespace",
    "router_selector",
    "engine_selector",
    "curvine_selector",
)


def cluster_flags_given(args: argparse.Namespace) -> list[str]:
    """The cluster-only flags on the command line (they make no sense with URL flags)."""
    given = [name for name in CLUSTER_FLAGS if getattr(args, name, None) is not None]
    return ["--" + name.replace("_", "-") for name in given]


@dataclass
class Cluster:
    """What the cluster options name: the kubeconfig's cluster and namespace, and the release's selectors."""

    kube: cliopts.Kube
    selectors: Selectors

    def api(self) -> Any:
        """A new CoreV1Api (one per thread that streams: kubernetes.stream patches its client)."""
        from kubernetes import client

        return client.CoreV1Api(cliopts.api_client(self.kube))


def cluster_from_args(args: argparse.Namespace) -> Cluster:
    kube = cliopts.resolve(args, instead=", or give --router-url and --replica-url (URL mode)")
    selectors = Selectors.for_release(args.release)
    selectors.router = args.router_selector or selectors.router
    selectors.engine = args.engine_selector or selectors.engine
    if args.curvine_selector is not None:
        selectors.curvine = args.curvine_selector or None
    return Cluster(kube, selectors)


def reach_from_args(
    args: argparse.Namespace, stack: ExitStack, every_pod: bool = False, cluster: Cluster | None = None
) -> Reached:
    """Open the port-forwards the cluster options describe; they close with `stack`."""
    from kvtier.podscripts import kvcheck

    cluster = cluster or cluster_from_args(args)
    namespace = cluster.kube.namespace
    source = Path(kvcheck.__file__).read_text()
    try:
        return stack.enter_context(reach(cluster.api(), namespace, cluster.selectors, source, every_pod))
    except UserError:
        raise
    except Exception as error:  # API errors: server unreachable, forbidden, unknown namespace
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(
            f"cannot reach release {args.release} in namespace {namespace} "
            f"(kubeconfig {cluster.kube.kubeconfig}, context {cluster.kube.context}): {first}"
        ) from None
