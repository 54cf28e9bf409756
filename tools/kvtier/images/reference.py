"""Image references as the kubelet and containerd read them: the toolkit's one parser of `image:` text.

The rules are those of github.com/distribution/reference (v0.6.0, normalize.go and regexp.go), which the
kubelet and containerd both use: the first path element is a registry only when it holds a `.` or a
`:`, is `localhost`, or has an upper-case letter; otherwise the registry is docker.io, where a
single-element name gains the `library/` prefix; `index.docker.io` is docker.io; a name with neither tag
nor digest is pulled as `latest`, and one with both is pulled by its digest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_REGISTRY = "docker.io"
LEGACY_DEFAULT_REGISTRY = "index.docker.io"
OFFICIAL_PREFIX = "library/"
DEFAULT_TAG = "latest"
NAME_MAX = 255  # registry/repository, without tag and digest

_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
_HOST_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_REGISTRY = re.compile(rf"(?:{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?")
# regexp.go's tag is `[\w][\w.-]{0,127}` in Go's RE2, where \w is ASCII [0-9A-Za-z_] only (regexp/syntax);
# Python's \w also matches Unicode letters and digits ("v1é", full-width letters), which the kubelet refuses.
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
# The algorithms go-digest (which the reference package validates with) knows, and their hex lengths.
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")


@dataclass(frozen=True)
class Reference:
    registry: str  # docker.io, ghcr.io, mirror.example:5000
    repository: str  # library/python, lmcache/vllm-openai
    tag: str  # "" only when the reference has a digest and no tag
    digest: str  # sha256:..., or ""

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def pinned(self) -> bool:
        """Pulled by a digest or a version tag: `latest` (said or implied) moves under the cluster."""
        return bool(self.digest) or self.tag != DEFAULT_TAG

    def __str__(self) -> str:
        """The fully qualified form (`docker.io/library/python:3.12`)."""
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def _split_registry(text: str) -> tuple[str, str]:
    first, slash, rest = text.partition("/")
    if not slash:
        return DEFAULT_REGISTRY, OFFICIAL_PREFIX + text
    if first == LEGACY_DEFAULT_REGISTRY:
        registry, remainder = DEFAULT_REGISTRY, rest
    elif first == "localhost" or any(c in first for c in ".:") or first.lower() != first:
        registry, remainder = first, rest
    else:
        registry, remainder = DEFAULT_REGISTRY, text
    if registry == DEFAULT_REGISTRY and "/" not in remainder:
        remainder = OFFICIAL_PREFIX + remainder
    return registry, remainder


def parse(text: str) -> Reference:
    """The reference `text` names; ValueError saying what is wrong when the kubelet could not pull it."""
    if not text:
        raise ValueError("the image is empty")
    if text != text.strip():
        raise ValueError("it has leading or trailing white space")
    if _IDENTIFIER.fullmatch(text):
        raise ValueError("a 64-hex-digit image ID is not a name a registry serves")
    registry, remainder = _split_registry(text)
    named, at, digest = remainder.partition("@")
    repository, colon, tag = named.partition(":")
    if not _REGISTRY.fullmatch(registry):
        raise ValueError(f"registry {registry!r} is not a host name or address, with an optional :port")
    if repository.lower() != repository:
        raise ValueError(f"repository {repository!r} must be lower case")
    if not _REPOSITORY.fullmatch(repository):
        raise ValueError(
            f"repository {repository!r} is not path components of a-z, 0-9 joined by '.', '_', '__' or '-'"
        )
    if len(f"{registry}/{repository}") > NAME_MAX:
        raise ValueError(f"registry/repository is longer than {NAME_MAX} characters")
    if colon and not _TAG.fullmatch(tag):
        raise ValueError(
            f"tag {tag!r} is not 1-128 of ASCII letters, digits, '_', '.', '-' (not starting with . or -)"
        )
    if at:
        algorithm, _, hex_digits = digest.partition(":")
        length = _DIGEST_HEX.get(algorithm)
        if length is None or not re.fullmatch(f"[a-f0-9]{{{length}}}", hex_digits):
            raise ValueError(
                f"digest {digest!r} is not sha256: and 64 lower-case hex digits (or sha384, sha512)"
            )
    if not colon and not at:
        tag = DEFAULT_TAG
    return Reference(registry, repository, tag, digest)


def is_pinned(text: str) -> bool:
    """Whether `text` pulls one fixed image (a digest or a tag other than latest); never for a reference
    that does not parse."""
    try:
        return parse(text).pinned
    except ValueError:
        return False
