"""kvtier.images.reference reads an image reference as the kubelet and containerd do.

The expectations are the normalisations github.com/distribution/reference documents (v0.6.0,
normalize.go: "ubuntu" is docker.io/library/ubuntu:latest, "docker.io/dmcgowan/myapp" keeps its
namespace, a tagged and digested busybox is pulled by its digest) and its grammar (regexp.go)."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# regexp.go's tag, `[\w][\w.-]{0,127}`, in Go's RE2: \w is [0-9A-Za-z_] and nothing else (Go's
# regexp/syntax documentation, "Perl character classes (all ASCII-only)").
WORD = string.ascii_letters + string.digits + "_"


def kubelet_takes_tag(tag: str) -> bool:
    return 1 <= len(tag) <= 128 and tag[0] in WORD and all(c in WORD + ".-" for c in tag)


@pytest.mark.parametrize(
    "tag",
    ["v1\u00e9", "\uff561", "\u0661\u0662\u0663", "v1_\u00df", "\u00b2", "v\u0301"],
    ids=["e-acute", "full-width-v", "arabic-indic-digits", "sharp-s", "superscript-two", "combining-accent"],
)
def test_a_tag_with_a_non_ascii_word_character_is_refused_at_the_tag(tag: str) -> None:
    with pytest.raises(ValueError, match="ASCII letters") as refused:
        parse(f"ghcr.io/team/app:{tag}")
    assert repr(tag) in str(refused.value), "the message quotes the tag"
    assert not is_pinned(f"ghcr.io/team/app:{tag}")


@given(st.text(alphabet=WORD + ".-+:/@ ~", max_size=135))
def test_ascii_tags_are_taken_exactly_when_the_grammar_takes_them(tag: str) -> None:
    try:
        ref = parse(f"ghcr.io/team/app:{tag}")
    except ValueError:
        assert not kubelet_takes_tag(tag), f"{tag!r} refused"
    else:
        assert kubelet_takes_tag(tag) and ref.tag == tag, f"{tag!r} taken as {ref}"


@given(
    st.text(alphabet=WORD, min_size=1, max_size=60),
    st.characters(min_codepoint=0x80, categories=("L", "N")),
    st.integers(0, 60),
)
def test_any_non_ascii_word_character_in_a_tag_is_refused(tag: str, extra: str, at: int) -> None:
    r"""Letters and numbers of any script: what Python's \w matches beyond ASCII."""
    with pytest.raises(ValueError, match="tag"):
        parse(f"ghcr.io/team/app:{tag[:at]}{extra}{tag[at:]}")
