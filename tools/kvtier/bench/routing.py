"""Does the router send a repeated prompt to the replica that already holds its KV blocks?

Each trial: a fresh prompt through the router (cold; note which replica served it), then the same
prompt again. A repeat is "warm" when the same replica serves it; its TTFT shows the hit.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kvtier.bench import methodology, prompts


@dataclass
class Trial:
    first: str | None
    repeat: str | None
    ttft_cold_s: float
    ttft_repeat_s: float
    repeat_l0_hit_tokens: float | None


@dataclass
class RoutingResult:
    strategy: str
    trials: list[Trial]

    @property
    def warm_ratio(self) -> float:
        warm = sum(1 for t in self.trials if t.first is not None and t.first == t.repeat)
        return warm / len(self.trials)

    @property
    def ttft_ratio(self) -> float:
        """median TTFT of the repeats / median TTFT of the first sends."""
        cold = statistics.median(t.ttft_cold_s for t in self.trials)
        return statistics.median(t.ttft_repeat_s for t in self.trials) / cold

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "warm_ratio": self.warm_ratio,
            "ttft_ratio": self.ttft_ratio,
            "ttft_cold_median_s": statistics.median(t.ttft_cold_s for t in self.trials),
            "ttft_repeat_median_s": statistics.median(t.ttft_repeat_s for t in self.trials),
            "trials": [asdict(t) for t in self.trials],
        }


def routing_trials(
    router_url: str,
    strategy: str,
    replicas: Sequence[methodology.Replica],
    model: str,
    trials: int,
    tokens: int,
    count: prompts.Tokenizer | None,
    step: methodology.Step,
    timeout: float = methodology.DEFAULT_TIMEOUT,
) -> RoutingResult:
    done: list[Trial] = []
    for index in range(trials):
        prompt, _actual, _exact = prompts.sized_prompt(tokens, count)
        cold, first, _ = methodology.measure(router_url, model, prompt, replicas, timeout=timeout)
        warm, repeat, tiers = methodology.measure(router_url, model, prompt, replicas, timeout=timeout)
        done.append(Trial(first, repeat, cold["ttft_s"], warm["ttft_s"], tiers.get("l0_hit_tokens")))
        step(f"{strategy} trial {index + 1}/{trials}")
    return RoutingResult(strategy, done)
