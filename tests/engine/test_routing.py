"""The real vllm-router, started with the flags the chart renders, in front of the real engines:
prefix-aware routing keeps repeats on the warm replica, round-robin does not, judged by where each repeat
went and by the engines' own prefix-cache hit counters. The TTFT ratios are printed, not asserted: with the
other pytest run on the second core, one replica can be the slow one, and a repeat on the idle replica
beat its cold first send by 3x with no hit (2026-12-03); `kvtier bench --rig` measures TTFT.
"""

from __future__ import annotations

from kvtier.bench import methodology, prompts, routing
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import router_flags

TRIALS, TOKENS = 4, 1500


def test_prefix_aware_keeps_repeats_warm_round_robin_does_not(engines: engine_rig.EngineRig, need) -> None:
    replicas = methodology.replicas_for(engines.urls)
    count = prompts.tokenize_counter(engines.urls[0], engine_rig.MODEL_NAME)
    for strategy in ("prefixaware", "roundrobin"):  # the chart's flags, not a stand-in (see router_flags)
        need(router_flags.router_flags(strategy)[1] == "chart", "umbrella chart's router flags unavailable")
    results = {}
    for strategy in ("prefixaware", "roundrobin"):
        with engines.router(strategy) as url:
            results[strategy] = routing.routing_trials(
                url, strategy, replicas, engine_rig.MODEL_NAME, TRIALS, TOKENS, count, lambda _s: None
            )
    aware, rr = results["prefixaware"], results["roundrobin"]
    print({k: (v.warm_ratio, round(v.ttft_ratio, 3)) for k, v in results.items()})
    assert aware.warm_ratio == 1.0
    assert rr.warm_ratio == 0.0  # two replicas, strictly alternating
    assert all((t.repeat_l0_hit_tokens or 0) > 0 for t in aware.trials)
    assert all(t.repeat_l0_hit_tokens == 0 for t in rr.trials)
