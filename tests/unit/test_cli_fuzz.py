"""Every kvtier subcommand through the real entry point (`python -m kvtier.cli`, a subprocess each) with
generated arguments and input files (cli_fuzz_inputs.py): malformed YAML/JSON, wrong types, zeros,
negatives, huge numbers, missing files, directories, FIFOs, non-UTF-8 bytes, bad kubeconfigs.

Each run must exit 0, 1 or 2 (tools/kvtier/exitcodes.py), print no Traceback, and an exit 2 must name
something the user gave (an argument, a file, the kubeconfig it read). At least 500 runs from a fixed
seed: KVTIER_FUZZ_RUNS asks for more, KVTIER_FUZZ_SEED for another seed (a failure prints the seed and
the command line to repeat it).

Nothing is dialled but closed ports on 127.0.0.1, and nothing long starts: validate always gets
--no-render (no Helm, no API server, no vLLM); cluster commands see an empty $KVTIER_CACHE (`up` with
--no-build refuses at once) and never the default cluster name; lint gets only --helm values it refuses
(a real lint runs Helm and may create a git ref); package always names a chart that does not exist
(before anything is packaged or pushed); generate only with --check (without it, it writes the repo);
bench, load, soak --rig and warm --rig only with a flag they refuse (they would start vLLM replicas); a
load run's router URLs are closed ports (it stops at their /health before any client starts);
unittest-compare only on folders that are not charts (it would run helm-unittest); images renders with
the pinned Helm (one `helm template` per environment, as validate's renders).
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_fuzz_inputs import CLOSED, Inputs, make

from kvtier import cli, exitcodes
from kvtier.cluster.common import binaries

RUNS = max(int(os.environ.get("KVTIER_FUZZ_RUNS") or 500), 500)
SEED = int(os.environ.get("KVTIER_FUZZ_SEED") or 20261203)
WORKERS = max(2, min(4, os.cpu_count() or 2))
TIMEOUT_S = 90  # one run; a hang (a FIFO read, a retry loop) is a failure, not a slow test
EXIT_CODES = {exitcodes.OK, exitcodes.FINDINGS, exitcodes.USAGE}

NUMBERS = [
    "0",
    "-1",
    "1",
    "2",
    "7",
    "0.5",
    "-0.0",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "1e-300",
    "x",
    "",
    " ",
    "1,2",
]
NUMBERS += ["99999999999999999999999999", "-99999999999999999999", "0x10", "३"]
URLS = [
    CLOSED,
    "http://127.0.0.1:1/v1/",
    "http://localhost:1",
    "http://[::1]:1",
    "notaurl",
    "http://",
    "ftp://127.0.0.1:1",
]
URLS += ["http://127.0.0.1:99999", "http://127.0.0.1:1/%zz", ""]
PLAN_NUMBERS = (
    "--gpu-memory-gib",
    "--activation-gib",
    "--l1-gib",
    "--l2-gib",
    "--chunk-size",
    "--write-gib-s",
)
PLAN_NUMBERS += (
    "--read-gib-s",
    "--cold-ttft-ms",
    "--cold-ttft-tokens",
    "--prefill-tps",
    "--request-overhead-ms",
)
PLAN_NUMBERS += ("--hit-overhead-ms",)
NAMES = ["kv", "", "-", "UPPER", "a" * 300, "näme", "x y", "../etc", "a=b", "--", "$(id)"]


@dataclass
class Case:
    argv: list[str]
    culprits: set[str] = field(default_factory=set)  # what an error message may name
    env: dict[str, str] = field(default_factory=dict)
    stdin: str = ""

    def add(self, *tokens: str | Path) -> Case:
        self.argv += [str(t) for t in tokens]
        self.culprits.update(str(t) for t in tokens if str(t).strip())
        return self

    def line(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return f"{env} python -m kvtier.cli {shlex.join(self.argv)}".strip()


class Generator:
    """Seeded invocations of each subcommand; each picks its options and inputs at random."""

    def __init__(self, rng: random.Random, inputs: Inputs) -> None:
        self.rng, self.inputs = rng, inputs

    def maybe(self, chance: float = 0.5) -> bool:
        return self.rng.random() < chance

    def pick(self, options: list[str] | list[Path]) -> str:
        return str(self.rng.choice(options))

    def values_file(self) -> str:
        return self.pick([*self.inputs.values.values(), *self.inputs.unreadable.values()])

    def any_path(self) -> str:
        pools = [self.inputs.values, self.inputs.configs, self.inputs.kubeconfigs, self.inputs.unreadable]
        return self.pick([p for pool in pools for p in pool.values()] + [self.inputs.root])

    def cluster_env(self, case: Case) -> None:
        """HOME (no kubeconfig, a broken one, one that points at a closed port) and $KUBECONFIG."""
        home = self.inputs.root / self.pick(["home-none", "home-bad", "home-good"])
        case.env["HOME"] = str(home)
        case.culprits.update({"~/.kube/config", str(home / ".kube" / "config")})
        if self.maybe(0.6):
            pool = [*self.inputs.kubeconfigs.values(), *self.inputs.unreadable.values()]
            listed = [self.pick(pool) for _ in range(self.rng.choice([1, 1, 2]))]
            case.env["KUBECONFIG"] = ":".join(listed)
            case.culprits.update([*listed, case.env["KUBECONFIG"]])

    def cluster_flags(self, case: Case) -> None:
        if self.maybe(0.4):
            case.add(
                "--kubeconfig",
                self.pick([*self.inputs.kubeconfigs.values(), *self.inputs.unreadable.values()]),
            )
        if self.maybe(0.3):
            case.add(self.pick(["--context", "--kube-context"]), self.pick(["fuzz", "gone", "", "x" * 80]))
        if self.maybe(0.3):
            case.add(self.pick(["-n", "--namespace"]), self.pick(["fuzz-ns", *NAMES]))

    def output(self, case: Case, old: bool = False) -> None:
        choice = self.rng.random()
        if choice < 0.2:
            case.add("-o", self.pick(["json", "table", "yaml", ""]))
        elif choice < 0.3 and old:
            case.add("--json")

    def validate(self) -> Case:
        case = Case(["validate", "--no-render"])
        self.output(case)
        for _ in range(self.rng.choice([0, 1, 1, 2])):
            case.add(self.values_file())
        if self.maybe(0.1):
            case.add("--list-rules")
        if self.maybe(0.2):
            case.add("-f", self.values_file())
        if self.maybe(0.15):
            case.add(
                self.pick(["--set", "--set-string"]), self.pick(["a.b=c", "x", "a[0]=1", "=", "a={b", "[=]"])
            )
        if self.maybe(0.2):
            case.add(
                "--kube-versions",
                self.pick(["1.30-1.35", "1.31", "1.x", "", "9.99", "1.35-1.30", "a-b", "1.30,9.9"]),
            )
        if self.maybe(0.2):
            case.add(
                "--pod-security", self.pick(["default=restricted", "x", "=baseline", "ns=root", "a=b=c"])
            )
        for flag in ("--jobs", "--helm", "--release"):
            if self.maybe(0.15):
                case.add(flag, self.pick(NUMBERS + NAMES))
        if self.maybe(0.1):
            case.add(self.pick(["--server", "--vllm"]))  # refused with --no-render, before any work
        if self.maybe(0.4):
            self.cluster_flags(case)
            self.cluster_env(case)
        return case

    def plan(self) -> Case:
        case = Case(["plan"], {"--model"})  # no model source given: the error names the flags
        self.output(case)
        source = self.rng.random()
        if source < 0.4:
            case.add(self.values_file())
        if source > 0.3 and self.maybe():
            case.add(
                "--model-config", self.pick([*self.inputs.configs.values(), *self.inputs.unreadable.values()])
            )
        if self.maybe(0.3):
            case.add(
                "--model", self.pick(["qwen2-7b", "deepseek-v2-lite", "Qwen/Qwen2-7B-Instruct", "nope", ""])
            )
        for flag in PLAN_NUMBERS:
            if self.maybe(0.12):
                case.add(flag, self.pick(NUMBERS))
        if self.maybe(0.2):
            case.add("--prompt-tokens", *[self.pick(NUMBERS) for _ in range(self.rng.randint(1, 3))])
        if self.maybe(0.15):
            case.add("--dtype", self.pick(["bfloat16", "fp8", "int3", ""]))
        if self.maybe(0.15):
            case.add("--backend", self.pick(["lmcache", "vllm-native", "other"]))
        if self.maybe(0.1):
            case.add("--reference-check")
        if self.maybe(0.25):
            self.plan_scale(case)
        return case

    def plan_scale(self, case: Case) -> None:
        if self.maybe(0.8):
            case.add("--scale")
        for flag in ("--replicas", "--curvine-workers"):
            if self.maybe(0.2):
                case.add(flag, self.pick(["8,16", "0", "4,x", "", "1", *NUMBERS]))
        for flag in ("--worker-disk-gib-s", "--nic-gbps", "--replica-qps"):
            if self.maybe(0.2):
                case.add(flag, self.pick(NUMBERS))
        if self.maybe(0.2):
            case.add("--load", self.pick([*self.inputs.values.values(), *self.inputs.unreadable.values()]))

    def preflight(self) -> Case:
        case = Case(["preflight", self.values_file()])
        case.culprits.add(case.argv[1])
        self.cluster_flags(case)
        self.cluster_env(case)
        if self.maybe(0.2):
            case.add("--release", self.pick(NAMES))
        self.output(case, old=True)
        return case

    def urls_or_cluster(self, case: Case, url_flags: list[str]) -> None:
        if self.maybe(0.6):
            for _ in range(self.rng.randint(1, 3)):
                case.add(self.pick(url_flags), self.pick(URLS))
            if self.maybe(0.1):
                self.cluster_flags(case)  # refused together with URL flags
        else:
            self.cluster_flags(case)
            self.cluster_env(case)
            for flag in ("--release", "--router-selector", "--engine-selector", "--curvine-selector"):
                if self.maybe(0.15):
                    case.add(flag, self.pick([*NAMES, "app=x", "a in (b"]))

    def smoke(self) -> Case:
        case = Case(["smoke"])
        self.urls_or_cluster(case, ["--router-url", "--replica-url", "--curvine-url"])
        if self.maybe(0.3):
            case.add("--l2-dir", self.any_path())
        if self.maybe(0.3):
            case.add("--l2", self.pick(["on", "off", "auto", "maybe"]))
        if self.maybe(0.2):
            case.add("--curvine-workers", self.pick(NUMBERS))
        if self.maybe(0.3):
            case.add("--model", self.pick(["m", ""]))
        self.output(case, old=True)
        return case

    def bench(self) -> Case:
        case = Case(["bench", "--out", str(self.inputs.root / "bench-out")])
        if self.maybe(0.2):
            case.argv[2] = self.any_path()
            case.culprits.add(case.argv[2])
        self.urls_or_cluster(case, ["--router-url", "--replica-url"])
        if self.maybe(0.15):  # --rig only with something it refuses: it would start two vLLM replicas
            case.add("--rig")
            if not any(a.endswith("-url") for a in case.argv) or self.maybe():
                case.add("--words", self.pick(["0", "-5", "299", "99999999999", "x"]))
        for flag in ("--repeats", "--turns", "--concurrency", "--timeout"):
            if self.maybe(0.15):
                case.add(flag, self.pick(NUMBERS))
        if self.maybe(0.3):
            case.add("--lengths", self.pick(["20", "0", "1,2", "x", "2,99999999999", "", "500,,1000", "-5"]))
        if self.maybe(0.5):
            case.add("--model", self.pick(["m", ""]))
        if self.maybe(0.1):
            case.add("--backend", self.pick(["lmcache", "vllm-native", "x"]))
        self.output(case, old=True)
        return case

    def load(self) -> Case:
        case = Case(["load", "--out", str(self.inputs.root / "load-out")])
        self.urls_or_cluster(case, ["--router-url", "--replica-url"])
        mix_flags = {
            "--qps": ["1", "0", "x", "1,,2", "-1", "", "nan"],
            "--requests": NUMBERS, "--system-prompts": NUMBERS,
            "--zipf": ["-1", "0", "1.2", "nan", "inf", "x"], "--id-base": NUMBERS,
            "--mean-turns": ["0.5", "1", "3", "inf"], "--document-share": ["-0.1", "0", "1", "2"],
            "--block-tokens": NUMBERS, "--max-prompt-tokens": NUMBERS, "--output-tokens": NUMBERS,
            "--slo-ms": ["0", "-5", "1000", "x"], "--seed": NUMBERS,
        }  # fmt: skip
        for flag, values in mix_flags.items():
            if self.maybe(0.1):
                case.add(flag, self.pick(values))
        if self.maybe(0.2):
            case.add(self.pick(["--tiers", "--routing"]), self.pick(["l0", "l0+l1+l2", "roundrobin", "x"]))
        # --rig only with a URL flag, which it refuses: it would start three vLLM replicas
        if self.maybe(0.15):
            case.add("--rig", "--router-url", self.pick(URLS))
        if self.maybe(0.3):
            case.add("--model", self.pick(["m", ""]))
        self.output(case)
        return case

    def soak(self) -> Case:
        case = Case(["soak", "--out", str(self.inputs.root / "soak-out")])
        values = {
            "--faults": ["none", "kill-engine,evict", "meteor", "", ",", "none,,l2-gone", "l2-full"],
            "--qps": NUMBERS, "--seed": NUMBERS,
        }  # fmt: skip
        for flag, choices in values.items():
            if self.maybe(0.2):
                case.add(flag, self.pick(choices))
        if self.maybe(0.3):  # --rig only with a value it refuses before anything starts: it starts vLLM
            refused = {"--requests": ["0", "-1", "1001", "x"], "--replicas": ["0", "-1", "1001", "x"]}
            refused["--max-prompt-tokens"] = ["0", "-1", "x"]
            flag = self.pick(sorted(refused))
            case.add("--rig", flag, self.pick(refused[flag]))
            if self.maybe(0.2):
                case.add(self.pick(["--router-url", "--reference-url"]), self.pick(URLS))
            self.output(case)
            return case
        # Against a release: never a reachable one (closed ports, a kubeconfig that cannot be used).
        self.urls_or_cluster(case, ["--router-url", "--reference-url"])
        for flag in ("--requests", "--max-prompt-tokens"):
            if self.maybe(0.15):
                case.add(flag, self.pick(NUMBERS))
        if self.maybe(0.1):
            flag = self.pick(["--no-integrity", "--replicas", "--backend"])
            case.add(
                flag,
                *{"--replicas": ["3"], "--backend": [self.pick(["vllm-native", "lmcache"])]}.get(flag, []),
            )
        self.output(case)
        return case

    def warm(self) -> Case:
        case = Case(["warm"])
        if self.maybe(0.3):  # --rig only with what it refuses before anything starts: it starts vLLM
            case.add("--rig")  # without --prefixes, or with a cluster flag: refused either way
            if self.maybe(0.7):
                case.add(self.pick(["--model", "--namespace", "--context"]), self.pick(NAMES))
                if self.maybe():
                    case.add("--prefixes", self.any_path())
            self.output(case)
            return case
        # Against a release: a kubeconfig that cannot be used, or one whose server is a closed port.
        self.cluster_flags(case)
        self.cluster_env(case)
        for flag in ("--release", "--model"):
            if self.maybe(0.3):
                case.add(flag, self.pick(NAMES))
        if self.maybe(0.1):
            case.add(self.pick(["--prefixes", "--backend"]), self.pick(["x", "lmcache"]))
        self.output(case)
        return case

    def cluster(self) -> Case:
        action = self.pick(["up", "down", "status", "exec"])
        case = Case(["cluster", action], {str(self.inputs.root / "cache")})  # $KVTIER_CACHE
        # Never the default name: the sandbox cache holds no cluster, and a typo'd default is no test.
        case.add("--name", self.pick([f"fz{self.rng.randrange(16**6):06x}", *NAMES[1:]]))
        if action == "up":
            case.add("--no-build")  # an empty cache: refused at once instead of building
            if self.maybe():
                case.add("--runtime", self.pick(["kwok", "real", "vm"]))
            if self.maybe(0.3):
                case.add("--timeout", self.pick(NUMBERS))
        elif action == "status":
            self.output(case, old=True)
        elif action == "exec" and self.maybe():
            case.add("--", "true")
        return case

    def unittest_compare(self) -> Case:
        case = Case(["unittest-compare"], {"CHART"})  # none given: the error names the argument
        for _ in range(self.rng.randint(0, 2)):
            case.add(self.any_path())
        if self.maybe(0.2):
            case.add("--pattern", self.pick(["tests/*_test.yaml", "", "["]))
        if self.maybe(0.2):
            case.add(self.pick(["--json-file", "--json"]), self.any_path())
        if self.maybe(0.1):
            case.add("--no-subchart")
        self.output(case)
        return case

    def lint(self) -> Case:
        case = Case(["lint"]).add("--helm", self.pick(["5", "x", "", "3,x", "2,3", "-3"]))
        self.output(case)
        return case

    def package(self) -> Case:
        case = Case(["package"]).add("--chart", self.pick(["nope", "curvin", "", "../charts/curvine", "*"]))
        if self.maybe():
            case.add(
                "--registry", self.pick(["oci://127.0.0.1:1/charts", "oci://", "http://127.0.0.1:1", "x", ""])
            )
        if self.maybe(0.2):
            case.add("--plain-http")
        if self.maybe(0.2):
            case.add("--helm", self.pick(["3", "4", "5", "x"]))
        if self.maybe(0.2):
            case.add("--destination", self.any_path())
        if self.maybe(0.2):
            case.add("--registry-config", self.any_path())
        if self.maybe(0.2):
            case.add("--password-stdin")
            case.stdin = self.pick(["secret\n", "", "\udcff"])
        if self.maybe(0.2):
            case.add("--dry-run")
        self.output(case)
        return case

    def generate(self) -> Case:
        return Case(["generate"]).add(self.pick(["--check", "--check", "--bogus"]))

    def images(self) -> Case:
        case = Case(["images"])
        if self.maybe(0.3):
            case.add("-o", self.pick(["text", "json", "table", "yaml", ""]))
        for _ in range(self.rng.choice([0, 1, 1, 2])):
            case.add(self.values_file())
        if self.maybe(0.2):
            case.add("-f", self.values_file())
        if self.maybe(0.2):
            case.add(
                self.pick(["--set", "--set-string"]),
                self.pick(["global.imageRegistry=mirror.example:5000", "a.b=c", "x", "=", "a={b", "[=]"]),
            )
        return case

    def top_level(self) -> Case:
        choice = self.pick(["--version", "--help", "help-of-a-command", "no-such-command", "none"])
        if choice == "help-of-a-command":
            return Case([self.pick(sorted(COMMANDS)), "--help"])
        if choice == "none":
            return Case([], {"usage: kvtier"})  # no command: the help, on stdout
        return Case([choice], {choice})


COMMANDS: dict[str, Callable[[Generator], Case]] = {
    "validate": Generator.validate,
    "plan": Generator.plan,
    "soak": Generator.soak,
    "warm": Generator.warm,
    "preflight": Generator.preflight,
    "smoke": Generator.smoke,
    "bench": Generator.bench,
    "load": Generator.load,
    "cluster": Generator.cluster,
    "unittest-compare": Generator.unittest_compare,
    "lint": Generator.lint,
    "package": Generator.package,
    "generate": Generator.generate,
    "images": Generator.images,
}
# Cheap commands more often: a run is a Python start-up plus the command's imports.
WEIGHTS = {"plan": 4, "validate": 3, "smoke": 3, "bench": 3, "preflight": 2, "cluster": 2, "package": 2}


def cases(inputs: Inputs, runs: int = RUNS, seed: int = SEED) -> list[Case]:
    rng = random.Random(seed)
    generator = Generator(rng, inputs)
    names = sorted(COMMANDS)
    made = [COMMANDS[name](generator) for name in names]  # every command at least once
    weights = [WEIGHTS.get(name, 1) for name in names]
    while len(made) < runs - 5:
        made.append(COMMANDS[rng.choices(names, weights)[0]](generator))
        if rng.random() < 0.05:
            made[-1].add("--no-such-flag")
    made += [generator.top_level() for _ in range(runs - len(made))]
    return made


def environment(sandbox: Path, case: Case) -> dict[str, str]:
    """The run's environment: no proxies (nothing may leave loopback), an empty kvtier cache, whose folder
    also holds the clusters (no $KVTIER_STATE_DIR: `cluster down` must not reach the test run's clusters)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and k != "KUBECONFIG"}
    env.pop(binaries.STATE_ENV, None)
    env.update(HOME=str(sandbox / "home-none"), KVTIER_CACHE=str(sandbox / "cache"), COLUMNS="120")
    env.pop("KVTIER_HELM", None)
    return {**env, **case.env}


def problems(case: Case, code: int, out: str, err: str) -> list[str]:
    """What is wrong with one run's outcome (empty when it is fine)."""
    found = []
    if code not in EXIT_CODES:
        found.append(f"exit code {code}")
    if "Traceback" in err or "Traceback" in out:
        found.append("a traceback")
    if code == exitcodes.USAGE and not any(c in err + out for c in case.culprits):
        found.append("an exit 2 that names none of its inputs")
    return found


def run(sandbox: Path, case: Case) -> str:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kvtier.cli", *case.argv],
            input=case.stdin,
            capture_output=True,
            text=True,
            errors="replace",
            cwd=sandbox,
            env=environment(sandbox, case),
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"{case.line()}\n  hung for {TIMEOUT_S} s"
    found = problems(case, done.returncode, done.stdout, done.stderr)
    if not found:
        return ""
    return f"{case.line()}\n  {', '.join(found)} (exit {done.returncode}):\n  {done.stderr[-1500:]}"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    return make(tmp_path_factory.mktemp("cli-fuzz"))


def test_every_subcommand_is_fuzzed(inputs: Inputs) -> None:
    parser = cli.build_parser()
    registered = set(next(a for a in parser._actions if a.dest == "command").choices)
    assert registered == set(COMMANDS), "a new subcommand needs a generator here"
    made = cases(inputs)
    assert len(made) == RUNS >= 500
    assert {c.argv[0] for c in made if c.argv} >= registered


def test_the_checks_catch_a_traceback_a_bad_exit_and_a_nameless_error() -> None:
    case = Case(["plan"]).add("--model-config", "/tmp/cfg.json")
    assert problems(case, 2, "", "kvtier plan: error: /tmp/cfg.json: num_attention_heads: 0 ...") == []
    assert problems(case, 1, "Traceback (most recent call last):", "") == ["a traceback"]
    assert problems(case, 3, "", "") == ["exit code 3"]
    assert problems(case, 2, "", "kvtier plan: error: something went wrong") == [
        "an exit 2 that names none of its inputs"
    ]


def test_generated_invocations_exit_cleanly(inputs: Inputs) -> None:
    made = cases(inputs)
    with ThreadPoolExecutor(WORKERS) as pool:
        failures = [f for f in pool.map(lambda c: run(inputs.root, c), made) if f]
    assert not failures, (
        f"{len(failures)} of {len(made)} runs failed (KVTIER_FUZZ_SEED={SEED}, run from {inputs.root}):\n"
        + "\n".join(failures[:15])
    )


@pytest.mark.parametrize(
    "command", [["validate"], ["plan"], ["preflight"], ["validate", "--no-render"], ["images"]]
)
def test_a_fifo_is_refused_before_anything_reads_it(inputs: Inputs, command: list[str]) -> None:
    """The fuzz keeps Helm out (--no-render); here the render path, which would hand the FIFO to Helm."""
    fifo = inputs.unreadable["fifo"]
    done = subprocess.run(
        [sys.executable, "-m", "kvtier.cli", *command, str(fifo)],
        capture_output=True,
        text=True,
        cwd=inputs.root,
        env=environment(inputs.root, Case([], env={"KUBECONFIG": str(inputs.good_kubeconfig)})),
        timeout=TIMEOUT_S,  # without the check, Helm (or Python) would wait on the FIFO forever
    )
    assert done.returncode == exitcodes.USAGE, done.stderr
    assert f"{fifo}: not a regular file" in done.stderr and "Traceback" not in done.stderr
