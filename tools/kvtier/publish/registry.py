"""An OCI chart registry, driven through the pinned Helm (login, show, push, pull).

Helm does the talking so that whatever Helm supports for credentials (its registry config file,
credential helpers, `helm registry login`) works here too. Plain HTTP is allowed for loopback
registries only (tests); every other registry is reached over TLS.
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kvtier import toolchain
from kvtier.errors import UserError


@dataclass(frozen=True)
class Registry:
    """`oci://host[:port]/path`, how to reach it, and which Helm registry config holds its credentials."""

    url: str
    plain_http: bool = False
    registry_config: Path | None = None  # None: Helm's own ($HELM_REGISTRY_CONFIG or its default)
    helm_major: int = 3
    allow_override: bool = True  # honour $KVTIER_HELM (tests pin Helm with False)

    def __post_init__(self) -> None:
        if not re.match(r"^oci://[^/\s]+(/[^\s]*)?$", self.url):
            raise UserError(
                f"registry {self.url!r} is not an OCI URL; expected oci://HOST[:PORT]/PATH, "
                "e.g. oci://ghcr.io/my-org/charts"
            )
        if self.plain_http and not is_loopback(self.host):
            raise UserError(
                f"--plain-http is only allowed for a loopback registry, not {self.host}; "
                "drop it to use TLS (the default)"
            )

    @property
    def host(self) -> str:
        return self.url.removeprefix("oci://").split("/", 1)[0]

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    def ref(self, chart: str) -> str:
        return f"{self.base}/{chart}"

    def helm(
        self, args: list[str], *, stdin: str | None = None, timeout: int = 300
    ) -> subprocess.CompletedProcess[str]:
        binary = toolchain.helm(self.helm_major, allow_override=self.allow_override)
        extra = ["--plain-http"] if self.plain_http else []
        config = ["--registry-config", str(self.registry_config)] if self.registry_config else []
        return subprocess.run(
            [str(binary), *args, *extra, *config],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def login(self, username: str, password: str) -> None:
        result = self.helm(
            ["registry", "login", self.host, "--username", username, "--password-stdin"], stdin=password
        )
        if result.returncode != 0:
            raise UserError(f"login to {self.host} as {username} failed: {_message(result)}")

    def exists(self, chart: str, version: str) -> bool:
        """Whether chart:version is in the registry; a UserError when the registry cannot tell us."""
        result = self.helm(["show", "chart", self.ref(chart), "--version", version])
        if result.returncode == 0:
            return True
        # Helm (3 and 4) reports an absent tag or repository as "<host>/<path>:<tag>: not found";
        # anything else (no credentials, refused connection, TLS) means we cannot tell.
        if f"{self.ref(chart).removeprefix('oci://')}:{tag(version)}: not found" in result.stderr:
            return False
        raise UserError(
            f"cannot check {self.ref(chart)}:{version} (so nothing was pushed): {_message(result)}"
        )

    def push(self, package: Path) -> str:
        """Push a packaged chart; returns the manifest digest Helm reports."""
        result = self.helm(["push", str(package), self.base])
        if result.returncode != 0:
            raise UserError(f"push of {package.name} to {self.base} failed: {_message(result)}")
        digest = re.search(r"Digest:\s*(sha256:[0-9a-f]{64})", result.stdout + result.stderr)
        return digest.group(1) if digest else ""

    def pull(self, chart: str, version: str, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        result = self.helm(["pull", self.ref(chart), "--version", version, "--destination", str(dest)])
        if result.returncode != 0:
            raise UserError(f"pull of {self.ref(chart)}:{version} failed: {_message(result)}")
        return dest / f"{chart}-{version}.tgz"


def is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def tag(version: str) -> str:
    """The OCI tag Helm uses for a chart version (`+` is not allowed in tags)."""
    return version.replace("+", "_")


def _message(result: subprocess.CompletedProcess[str]) -> str:
    text = (result.stderr or result.stdout).strip().splitlines()
    return text[-1] if text else f"helm exited {result.returncode}"
