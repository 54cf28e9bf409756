"""What a `kvtier validate` run checks against. Kept free of heavy imports: the command reads these
before it starts Helm, and Helm starts before the checkers are imported."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kvtier import paths
from kvtier.errors import UserError

DEFAULT_MINORS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
POD_SECURITY_LEVELS = ("restricted", "baseline", "privileged")  # least to most privileged
OFFLINE_ENV = "KVTIER_VALIDATE_OFFLINE"  # =1: as --offline (a CI job without the control plane's binaries)
IDLE_ENV = "KVTIER_LOCAL_SERVER_IDLE"  # seconds a local control plane a run started waits for the next run
IDLE_DEFAULT_S = 900
# The name of the local control plane a run starts and keeps up (under $KVTIER_STATE_DIR, default the
# cache): another name gives a run a control plane of its own, as the tests do.
CLUSTER_ENV = "KVTIER_VALIDATE_CLUSTER"
CLUSTER_DEFAULT = "kvtier-validate"


@dataclass
class Options:
    render: bool = True
    helm_majors: tuple[int, ...] = (3, 4)
    minors: tuple[str, ...] = DEFAULT_MINORS
    release: str = "kvtier"
    namespace: str = "kvtier"
    kube_context: str | None = None
    kubeconfig: str | None = None
    # Dry-run the renders on an API server (--context's, else the local control plane): True when asked
    # (--server: none to be had is an error), None where one can be had without asking (the command's
    # default; otherwise the report says why not), False never (--offline, and the library's default).
    server: bool | None = False
    vllm: bool = False  # judge the engines' args with the pinned vLLM in the engine venv
    pod_security: dict[str, str] = field(default_factory=dict)
    jobs: int = max(os.cpu_count() or 2, 2)
    schema_source: Path | None = None
    # Layered over every environment, as `helm install ENV -f A -f B --set x=y` would: -f files in order,
    # then every --set, then every --set-string (Helm's order, whatever the command line's).
    values: tuple[Path, ...] = ()
    sets: tuple[str, ...] = ()
    set_strings: tuple[str, ...] = ()
    # --model-config: (model id, or "" for any model, and the config.json or model folder), read by the rules
    model_configs: tuple[tuple[str, Path], ...] = ()

    def overlay(self) -> list[str]:
        """The same layers as Helm arguments, after an environment's own `-f`."""
        return (
            [arg for v in self.values for arg in ("-f", str(v))]
            + [arg for s in self.sets for arg in ("--set", s)]
            + [arg for s in self.set_strings for arg in ("--set-string", s)]
        )

    @property
    def kube_version(self) -> str:
        """The version Helm renders for (`--kube-version`): the oldest minor checked."""
        return f"{self.minors[0]}.0"


def collect(args: list[str]) -> list[Path]:
    """Files to validate: each FILE, every *.yaml/*.yml in each DIR; default values/."""
    found: list[Path] = []
    for arg in args or [str(paths.VALUES)]:
        path = Path(arg)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
            if not files:
                raise UserError(f"{path}: no *.yaml values files in this directory")
            found.extend(files)
        elif path.is_file():
            found.append(path)
        elif path.exists():  # a FIFO would hang Helm's read of it
            raise UserError(
                f"{path}: not a regular file (a FIFO, socket or device); expected a YAML values file"
            )
        else:
            raise UserError(f"{path}: no such file or directory")
    return found
