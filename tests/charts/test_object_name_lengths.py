"""Object names stay within Kubernetes' limits for long release names, in every environment.

Helm truncates the base name to 63 characters, but suffixes added after that can push a name past
what the API server accepts (a CronJob's 52, a DNS label's 63), which fails only at install time.
"""

from __future__ import annotations

import pytest
from render import helm_bin, render_docs

from kvtier import paths

# The longest release name helm accepts is 53 characters.
LONG_RELEASE = "a-platform-team-release-name-that-is-very-long-x53"[:53]
# kind -> longest name the API server (or the controller that derives names from it) accepts
LIMITS = {
    "CronJob": 52,  # the controller appends an 11-character job suffix
    "StatefulSet": 52,  # pods get a controller-revision-hash label of name + hash (<= 63)
    "Service": 63,  # a DNS label
}
ENVIRONMENTS = [None, *sorted(p.name for p in paths.VALUES.glob("*.yaml"))]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_names_fit_the_api_server_limits_with_a_long_release_name(env: str | None, need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    values = [paths.VALUES / env] if env else []
    docs = render_docs("kv-tiered-inference", values=values, release=LONG_RELEASE)
    too_long = [
        f"{doc['kind']}/{doc['metadata']['name']} ({len(doc['metadata']['name'])} > {LIMITS[doc['kind']]})"
        for doc in docs
        if doc.get("kind") in LIMITS and len(doc["metadata"]["name"]) > LIMITS[doc["kind"]]
    ]
    assert docs, "nothing rendered"
    assert not too_long, too_long
