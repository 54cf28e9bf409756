"""The router flags the rig takes from the rendered chart (pinned Helm 3), for every strategy."""

from __future__ import annotations

import pytest

from kvtier import paths
from kvtier.engine_rig import router_flags


@pytest.mark.parametrize("strategy", sorted(router_flags.STRATEGY_POLICY))
def test_chart_renders_the_policy_of_each_strategy(strategy: str, need) -> None:
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned helm3 not built (make tools)")
    need((router_flags.CHART / "Chart.yaml").exists(), "umbrella chart not present")
    flags = router_flags.chart_flags(strategy)
    policy = router_flags.STRATEGY_POLICY[strategy]
    assert flags[flags.index("--policy") + 1] == policy
    # Where things are is the rig's to say: no discovery or listen flags survive.
    assert not {f.split("=")[0] for f in flags} & set(router_flags.DISCOVERY_FLAGS)
