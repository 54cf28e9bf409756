"""kubectl and Helm as clients of a real-node cluster: run inside its network namespace (the only place
its addresses exist), with its kubeconfig."""

from __future__ import annotations

import os
import subprocess

from kvtier import paths, waiting
from kvtier.cluster.realnode import lifecycle as realnode


class Kube:
    """kubectl and Helm as clients inside the cluster's network namespace."""

    def __init__(self, cluster: realnode.RealCluster) -> None:
        self.cluster = cluster

    def run(self, argv: list[str], stdin: str = "", check: bool = True, timeout: float = 180) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        proc = subprocess.run(
            self.cluster.command(argv), input=stdin, capture_output=True, text=True, env=env, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"`{' '.join(argv)}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc.stdout + (proc.stderr if not check else "")

    def kubectl(self, *args: str, stdin: str = "", check: bool = True) -> str:
        return self.run([str(paths.TOOLS_BIN / "kubectl"), *args], stdin=stdin, check=check)

    def helm(
        self, helm: str, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        proc = subprocess.run(
            self.cluster.command([str(paths.TOOLS_BIN / helm), *args]),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"`{helm} {' '.join(args)}` failed:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def wait_phase(self, namespace: str, pod: str, phases: set[str], timeout: float = 120) -> str:
        seen = [""]

        def reached() -> str:
            seen[0] = self.kubectl("get", "pod", pod, "-n", namespace, "-o", "jsonpath={.status.phase}")
            return seen[0] if seen[0] in phases else ""

        def stuck(_: str) -> AssertionError:
            described = self.kubectl("describe", "pod", pod, "-n", namespace, check=False)
            return AssertionError(
                f"pod {namespace}/{pod} still {seen[0]!r} after {timeout:.0f}s:\n{described}"
            )

        return waiting.wait_until(reached, deadline=waiting.deadline_in(timeout), fail=stuck)
