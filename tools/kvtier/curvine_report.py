"""What `cv report json` says about a running Curvine cluster, read without a cluster (pure parts shared by
the node tier's observers and `kvtier soak`'s Curvine faults).

Curvine v0.4.1 (CurvineIO/curvine, commit 709f247), curvine-cli/src/cmds/report.rs: `cv report json`
prints the leader's MasterInfo, found by the client among `master_addrs`: `active_master` is the leader's
`<hostname>:<rpc port>`, its hostname the master pod's DNS name (charts/curvine sets
CURVINE_MASTER_HOSTNAME so), and `live_workers` each worker's `address.hostname`. The server image keeps
the CLI in `$CURVINE_HOME/bin` with CURVINE_HOME=/app/curvine (curvine-docker/deploy/Dockerfile_rocky9;
charts/curvine/README.md's image table).
"""

from __future__ import annotations

import json
from typing import Any

SERVER_HOME = "/app/curvine"
CV = f"{SERVER_HOME}/bin/cv"
# Run in a master pod with `sh -c`: the CLI logs to stderr, the JSON goes to stdout.
REPORT_SCRIPT = f"{CV} report json 2>/dev/null"
# The labels charts/curvine gives its pods (templates/_helpers.tpl, curvine.selectorLabels and labels).
COMPONENT_LABEL = "app.kubernetes.io/component"


class ReportError(ValueError):
    """`cv report json` printed no MasterInfo (no leader answered, or the CLI failed)."""


def parse(output: str) -> dict[str, Any]:
    """The MasterInfo in `cv report json`'s output (anything before its first `{` is dropped)."""
    start = output.find("{")
    if start < 0:
        raise ReportError(f"`cv report json` printed no JSON: {output.strip()[-300:]!r}")
    try:
        info = json.loads(output[start:])
    except json.JSONDecodeError as error:
        said = output[start:][:300]
        raise ReportError(f"`cv report json` printed broken JSON ({error.msg}): {said!r}") from None
    if not isinstance(info, dict):
        raise ReportError(f"`cv report json` printed {type(info).__name__}, not a MasterInfo object")
    return info


def leader_pod(info: dict[str, Any]) -> str:
    """The leader's pod name: the first label of `active_master`'s hostname; "" when the report names
    none (no leader elected)."""
    return str(info.get("active_master") or "").split(":")[0].split(".")[0]


def worker_hosts(info: dict[str, Any]) -> list[str]:
    """The hostnames the live workers registered under."""
    return sorted(w["address"]["hostname"] for w in info.get("live_workers", []))


def component_selector(masters: str, component: str) -> str | None:
    """The selector of the release's `component` pods, from its masters' selector (the chart's labels
    differ only by component); None when that selector does not name the master component."""
    terms = [term.strip() for term in masters.split(",")]
    master = f"{COMPONENT_LABEL}=master"
    if master not in terms:
        return None
    return ",".join(f"{COMPONENT_LABEL}={component}" if term == master else term for term in terms)
