"""While a real-node cluster is up, the machine's own network namespace refuses the cluster's addresses.

The node, Service and pod ranges (netns.PRIVATE_RANGES) exist only inside the cluster's namespace. A
client that dials one of them from the machine's namespace by mistake would follow the default route
off the machine; `install` adds an `unreachable` route for each range there, so such a dial fails at once
with EHOSTUNREACH. The routes carry a protocol number of their own (`PROTOCOL`), so nothing else is ever
removed; every real-node cluster shares them, so `release` removes them only when no cluster's namespace
is left. Both hold a lock on the namespaces' folder, so a cluster coming up while another goes down
keeps its routes.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from kvtier.cluster.realnode import netns
from kvtier.errors import UserError

# The routes' owner mark (rtnetlink protocol; iproute2 names 0-192 in /etc/iproute2/rt_protos, not this).
PROTOCOL = "241"
LABELS = {"gateway": "via", "dev": "dev", "protocol": "proto"}


def _ip(*args: str) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise UserError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc.stdout


def machine_routes() -> list[dict[str, object]]:
    """The IPv4 routes of the machine's main table, as `ip -json` gives them."""
    return list(json.loads(_ip("-json", "-4", "route", "show", "table", "main") or "[]"))


def _ours(route: dict[str, object]) -> bool:
    return route.get("type") == "unreachable" and str(route.get("protocol")) == PROTOCOL


def _network(route: dict[str, object]) -> ipaddress.IPv4Network | None:
    dst = str(route.get("dst", ""))
    return None if dst == "default" else ipaddress.IPv4Network(dst, strict=False)


def present(routes: list[dict[str, object]] | None = None) -> list[str]:
    """The ranges that have their unreachable route now."""
    found = {str(_network(r)) for r in (machine_routes() if routes is None else routes) if _ours(r)}
    return [cidr for cidr in netns.PRIVATE_RANGES.values() if cidr in found]


def conflicts(routes: list[dict[str, object]]) -> list[str]:
    """The machine's own routes inside a cluster range: they would win over (or clash with) the
    unreachable route, and mean the machine really reaches those addresses elsewhere."""
    found = []
    for kind, cidr in netns.PRIVATE_RANGES.items():
        wanted = ipaddress.IPv4Network(cidr)
        for route in routes:
            network = _network(route)
            if network is not None and not _ours(route) and network.subnet_of(wanted):
                found.append(f"{network} (`{_describe(route)}`) lies in the cluster's {kind} range {cidr}")
    return found


def _describe(route: dict[str, object]) -> str:
    """The route as `ip route` prints it (its main fields)."""
    words = [str(route["type"])] if "type" in route else []
    words.append(str(route.get("dst", "")))
    words += [f"{word} {route[key]}" for key, word in LABELS.items() if key in route]
    return " ".join(words)


@contextmanager
def _locked() -> Iterator[None]:
    """Serialises install and release between processes: the namespaces' folder is the lock. Without
    that folder no cluster has ever had a namespace here (iproute2 never removes it): nothing to guard."""
    if not netns.NETNS_DIR.is_dir():
        yield
        return
    fd = os.open(netns.NETNS_DIR, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def install() -> list[str]:
    """Add the unreachable routes that are missing; the ranges added. Refuses (UserError) when the
    machine routes part of a range itself."""
    with _locked():
        routes = machine_routes()
        clashes = conflicts(routes)
        if clashes:
            raise UserError(
                "the real-node cluster's private ranges overlap this machine's own routes: "
                + "; ".join(clashes)
                + ". A client dialling the cluster from outside its namespace would reach that network;"
                " run the tier on a machine without routes into those ranges (docs/cluster.md, Network)"
            )
        have = present(routes)
        added = [cidr for cidr in netns.PRIVATE_RANGES.values() if cidr not in have]
        for cidr in added:
            _ip("route", "add", "unreachable", cidr, "proto", PROTOCOL, "table", "main")
        return added


def release() -> list[str]:
    """Remove the routes when no real-node cluster's namespace is left; the ranges removed."""
    with _locked():
        if netns.cluster_namespaces():
            return []
        # Ours by their mark, ranges an older release used too (the pod range was node 1's /24).
        ours = [str(_network(r)) for r in machine_routes() if _ours(r)]
        removed = present() + [cidr for cidr in ours if cidr not in netns.PRIVATE_RANGES.values()]
        for cidr in removed:
            _ip("route", "del", "unreachable", cidr, "proto", PROTOCOL, "table", "main")
        return removed
