"""The layers of `kvtier validate` that ask a live judge: the API server's dry run (by default where one
can be had, --server to insist, --offline to skip), the cluster the release goes to (--context: what the
pods read exists, some node can run them) and vLLM's own parser (--vllm). Each imports its client only
when asked, so an offline run loads none of them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from typing import Any

from kvtier.errors import UserError
from kvtier.validate.findings import SERVER, UNAVAILABLE, VLLM, FileReport
from kvtier.validate.options import Options


def check_vllm(judged: list[tuple[FileReport, Any, list[dict[str, Any]]]], options: Options) -> None:
    """The engines' `vllm serve` args of every file through the pinned vLLM, in one probe process."""
    if not options.vllm:
        for report, _, _ in judged:
            report.skip(VLLM, "not asked (--vllm parses the engine args with vLLM in the engine venv)")
        return
    from kvtier.validate.layers import vllm_check

    per_file = [
        (report, loaded, vllm_check.engines(manifests, report.file)) for report, loaded, manifests in judged
    ]
    every = [e for _, _, engines in per_file for e in engines]
    verdicts = vllm_check.probe(every) if every else []
    for report, loaded, engines in per_file:
        if not engines:
            report.skip(VLLM, "no engine Deployment rendered (hyperpod: the operator renders vLLM)")
        elif isinstance(verdicts, str):
            report.skip(VLLM, verdicts, UNAVAILABLE)
        else:
            mine, verdicts = verdicts[: len(engines)], verdicts[len(engines) :]
            found = [
                vllm_check.finding(e, v, loaded)
                for e, v in zip(engines, mine, strict=True)
                if not v.get("ok")
            ]
            report.add(
                VLLM, found, "" if found else f"{len(engines)} engine(s), vLLM's parser and config checks"
            )


@contextmanager
def server_judge(options: Options, given: Any) -> Iterator[Any]:
    """The API server that judges the renders (the caller's, or --server's), None when not asked, or the
    reason (a str) why the default mode has none."""
    if given is not None or options.server is False:
        yield given
        return
    from kvtier.validate.layers import server

    if options.server is None and (why := server.unavailable(options.kube_context)):
        yield why
        return
    with ExitStack() as stack:
        judge: Any  # a server.Judge, or why there is none
        try:
            judge = stack.enter_context(
                server.connect(
                    options.namespace, options.kube_context, options.kubeconfig, options.pod_security
                )
            )
        except UserError as error:
            if options.server:  # asked for: no judge is an error
                raise
            judge = f"no API server could be had: {error}"
        yield judge


def storage_classes(judge: Any, options: Options) -> Any:
    """Who says what a StorageClass is (l2-storageclass-gives-rwx): the API server that judges the renders,
    else --context's cluster (the cluster layer's); None offline, where a class is known by name only."""
    from kvtier.validate.layers import storage_classes

    if judge is not None and not isinstance(judge, str):
        return storage_classes.reader(judge.rest, judge.where, release_cluster=not judge.local)
    if options.kube_context:
        where = f"context {options.kube_context}"
        rest = _context_rest(options.kube_context, options.kubeconfig)
        return storage_classes.reader(rest, where, release_cluster=True)
    return None


def check_cluster(report: FileReport, manifests: list[dict[str, Any]], options: Options) -> None:
    """With --context: what the pods read from the namespace (Secrets, ConfigMaps, claims) exists there,
    and some node of the cluster could run each workload's pods."""
    if not options.kube_context or not manifests:
        return
    import urllib3

    from kvtier.cluster.common.rest import ApiException
    from kvtier.validate.checks import placement, references

    where = f"context {options.kube_context}"
    try:
        rest = _context_rest(options.kube_context, options.kubeconfig)
        found = references.check(rest, options.namespace, manifests, report.file, where)
        try:
            nodes: list[dict[str, Any]] | str = list(rest.get("/api/v1/nodes")["items"])
        except ApiException as error:
            nodes = f"{error.status} {error.reason}"
    except (OSError, urllib3.exceptions.HTTPError) as error:
        raise UserError(f"--context {options.kube_context}: the API server did not answer: {error}") from None
    checked = len({(r.kind, r.name) for r in references.references(manifests)})
    report.add(
        references.REFERENCES, found, f"{checked} Secret(s), ConfigMap(s), claim(s) in {options.namespace}"
    )
    if isinstance(nodes, str):
        report.skip(placement.PLACEMENT, f"the nodes could not be listed ({nodes})", UNAVAILABLE)
        return
    placed, workloads = placement.check(nodes, manifests, report.file)
    report.add(placement.PLACEMENT, placed, f"{workloads} workload(s) against {len(nodes)} node(s)")


@cache
def _context_rest(context: str, kubeconfig: str | None) -> Any:
    from kvtier.cluster.common.rest import Rest

    return Rest.from_kubeconfig(kubeconfig, context)


def check_server(
    report: FileReport, manifests: list[dict[str, Any]], loaded: Any, judge: Any, options: Options
) -> None:
    """The server-side dry run of one file's distinct rendered objects (Helm 3's and 4's)."""
    if judge is None:
        report.skip(SERVER, "offline (--offline or $KVTIER_VALIDATE_OFFLINE): no object was dry-run")
        return
    if isinstance(judge, str):
        report.skip(SERVER, judge, UNAVAILABLE)
        return
    if not manifests:
        report.skip(SERVER, "no render (Helm refused the values)")
        return
    from kvtier.validate.layers import server

    try:
        found, detail = server.judge(judge, manifests, loaded, report.file)
    except UserError as error:
        if options.server:  # asked for: no verdict is an error
            raise
        report.skip(SERVER, str(error).removeprefix("--server: "), UNAVAILABLE)
        return
    report.add(SERVER, found, detail if not found else "")
