"""A whole benchmark run: resolve the model, calibrate prompts, run each part with a progress bar,
write the results (JSON, CSV, PNG) and return them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kvtier.bench import methodology, prompts, report
from kvtier.podscripts import kvcheck

ONE_REPLICA = (
    "one replica reached: the other-replica case (a prompt cached on A, sent to B) needs two; "
    "give --replica-url twice, or scale the release's engines to two Ready replicas"
)


@dataclass
class BenchPlan:
    replicas: list[methodology.Replica]
    router: str | None
    model: str | None
    lengths: Sequence[int] = methodology.DEFAULT_LENGTHS
    repeats: int = 3
    turns: int = 4
    context_tokens: int = 1000
    turn_words: int = 100
    concurrency: int = 0
    out: Path = Path("bench-results")
    timeout: float = methodology.DEFAULT_TIMEOUT

    def skipped(self) -> list[dict[str, str]]:
        """The cases this plan cannot measure, each with why (a table row and a JSON entry, not a gap)."""
        if len(self.replicas) >= 2:
            return []
        return [{"case": "warm-other", "reason": ONE_REPLICA}]

    def steps(self) -> int:
        cases = 2 + min(1, len(self.replicas) - 1)
        turns = 2 * self.turns if self.turns else 0
        return len(self.lengths) * self.repeats * cases + turns + (2 if self.concurrency else 0)


def resolve_model(url: str) -> str:
    models = kvcheck.http_json(url.rstrip("/") + "/v1/models", timeout=30)
    ids = [m.get("id") for m in models.get("data", [])] if isinstance(models, dict) else []
    if not ids:
        raise kvcheck.CheckError(f"{url}/v1/models lists no model; pass --model")
    return str(ids[0])


def tokenizer_for(plan: BenchPlan, model: str, console: Console) -> prompts.Tokenizer | None:
    """Exact token counts from replica A's /tokenize when it serves one; else word estimates."""
    count = prompts.tokenize_counter(plan.replicas[0].url, model)
    try:
        count("probe")
        return count
    except kvcheck.CheckError as error:
        console.print(
            f"prompt lengths are estimates (1 token per word): {error}", style="yellow", markup=False
        )
        return None


def execute(plan: BenchPlan, console: Console) -> dict[str, Any]:
    entry = plan.router or plan.replicas[0].url
    model = plan.model or resolve_model(entry)
    count = tokenizer_for(plan, model, console)
    results: dict[str, Any] = {"model": model, "replicas": [asdict(r) for r in plan.replicas]}
    results["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results["skipped"] = plan.skipped()
    for skipped in results["skipped"]:
        console.print(
            f"{skipped['case']} skipped: {skipped['reason']}", style="yellow", highlight=False, markup=False
        )
    columns = (TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("bench", total=plan.steps())

        def step(label: str) -> None:
            progress.update(task, advance=1, description=label)

        samples = methodology.ttft_sweep(
            plan.replicas, model, plan.lengths, plan.repeats, count, step, plan.timeout
        )
        if plan.turns:
            results["multi_turn"] = methodology.multi_turn(
                entry,
                plan.replicas,
                model,
                plan.turns,
                plan.context_tokens,
                plan.turn_words,
                count,
                step,
                plan.timeout,
            )
        if plan.concurrency:
            middle = sorted(plan.lengths)[len(plan.lengths) // 2]
            results["concurrency"] = methodology.concurrency(
                entry, model, plan.concurrency, middle, count, step
            )
    results["samples"] = [asdict(s) for s in samples]
    results["summary"] = report.summary_rows(samples)
    plan.out.mkdir(parents=True, exist_ok=True)
    report.write_json(plan.out / "bench.json", results)
    report.write_csv(plan.out / "bench.csv", samples)
    report.plot(plan.out / "ttft.png", results["summary"], f"TTFT vs prompt length ({model})")
    return results
