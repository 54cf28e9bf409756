"""kvtier.images.reference reads an image reference as the kubelet and containerd do.

The expectations are the normalisations github.com/distribution/reference documents (v0.6.0,
normalize.go: "ubuntu" is docker.io/library/ubuntu:latest, "docker.io/dmcgowan/myapp" keeps its
namespace, a tagged and digested busybox is pulled by its digest) and its grammar (regexp.go)."""

from __future__ import annotations

import pytest

from kvtier.images.reference import is_pinned, parse

BUSYBOX_DIGEST = "sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa"


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("ubuntu", "docker.io", "library/ubuntu", "latest", ""),
        ("ubuntu:24.04", "docker.io", "library/ubuntu", "24.04", ""),
        ("docker.io/ubuntu", "docker.io", "library/ubuntu", "latest", ""),
        ("docker.io/dmcgowan/myapp", "docker.io", "dmcgowan/myapp", "latest", ""),
        ("index.docker.io/dmcgowan/myapp:v1", "docker.io", "dmcgowan/myapp", "v1", ""),
        (
            f"docker.io/library/busybox:latest@{BUSYBOX_DIGEST}",
            "docker.io",
            "library/busybox",
            "latest",
            BUSYBOX_DIGEST,
        ),
        (f"busybox@{BUSYBOX_DIGEST}", "docker.io", "library/busybox", "", BUSYBOX_DIGEST),
        ("localhost/app", "localhost", "app", "latest", ""),
        (
            "mirror.example:5000/team/engine-image:v2.4.1",
            "mirror.example:5000",
            "team/engine-image",
            "v2.4.1",
            "",
        ),
        ("registry:5000/app:1", "registry:5000", "app", "1", ""),
        ("[::1]:5000/app:1", "[::1]:5000", "app", "1", ""),
        ("Registry/app", "Registry", "app", "latest", ""),  # upper case: only a host may have it
        ("ghcr.io/a/b/c:v1_2.3-x", "ghcr.io", "a/b/c", "v1_2.3-x", ""),
        ("app:5000", "docker.io", "library/app", "5000", ""),  # one element: a tag, never a port
    ],
)
def test_references_read_as_the_kubelet_reads_them(text, registry, repository, tag, digest) -> None:
    ref = parse(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)
    assert parse(str(ref)) == ref, "the fully qualified form names the same image"
    assert is_pinned(text) == (bool(digest) or tag != "latest")


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ubuntu",
        "ubuntu:",
        "library/Ubuntu",
        "ubuntu@sha256:abc",
        f"ubuntu@{BUSYBOX_DIGEST.upper()}",
        "ubuntu@md5:" + "a" * 32,
        "a" * 64,
        "ghcr.io/-app:v1",
        "ghcr.io/app:.v1",
        "ghcr.io/app:" + "v" * 129,
        "ghcr.io//app",
        "host_name.example/app",
        "example.com/" + "a" * 250,
    ],
)
def test_references_the_kubelet_refuses_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse(text)
    assert not is_pinned(text)
