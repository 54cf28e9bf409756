"""`kvtier package`: package both charts at their Chart.yaml versions and push them to an OCI registry.

versioning (semantic versions, the version-bump and release rules) and changelog (CHANGELOG.md and
the Artifact Hub annotation) decide whether a chart may be published; package builds and pushes the
archives through registry (the pinned Helm's OCI client); registry_server runs the CNCF distribution
registry on loopback for the round-trip tests. `kvtier lint` reuses versioning's version-bump check.
"""
