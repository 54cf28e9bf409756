"""What the API server serves, read straight from discovery (no cache that could miss a new CRD)."""

from __future__ import annotations

from dataclasses import dataclass

from kvtier.cluster.common.rest import ApiException, Rest


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    name: str  # plural, as RBAC names it
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        """URL path of the collection (cluster-wide for namespaced kinds too)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{prefix}/{self.name}"

    def namespaced_path(self, namespace: str) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{prefix}/namespaces/{namespace}/{self.name}"


def group_versions(rest: Rest) -> list[str]:
    """Every served group/version (`v1`, `apps/v1`, ...)."""
    versions = list(rest.get("/api").get("versions", []))
    for group in rest.get("/apis").get("groups", []):
        versions += [v["groupVersion"] for v in group.get("versions", [])]
    return versions


def resources(rest: Rest, group_version: str) -> tuple[Resource, ...]:
    """The objects served in one group/version (empty when it is not served)."""
    path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    try:
        body = rest.get(path)
    except ApiException as error:
        if error.status == 404:
            return ()
        raise
    group, _, version = group_version.rpartition("/")
    return tuple(
        Resource(group, version, r["name"], r["kind"], r["namespaced"], tuple(r.get("verbs", ())))
        for r in body.get("resources", [])
        if "/" not in r["name"]  # subresources (pods/log) are not objects
    )


def find(rest: Rest, api_version: str, kind: str) -> Resource | None:
    """The resource serving `kind` in `api_version`, or None when the server does not serve it."""
    return next((r for r in resources(rest, api_version) if r.kind == kind), None)


def api_versions_for_helm(rest: Rest) -> list[str]:
    """`--api-versions` values for `helm template`: every group/version and group/version/Kind."""
    out = []
    for group_version in group_versions(rest):
        out.append(group_version)
        out += [f"{group_version}/{r.kind}" for r in resources(rest, group_version)]
    return out
