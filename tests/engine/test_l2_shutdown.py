"""An engine pod shut down while its L2 chunk writes run (SIGTERM in a rolling upgrade or a scale-in):
The pinned LMCache frees CPU memory at close without waiting for the writes its remote backends have handed
to threads, which then read unmapped memory (docs/reliability.md, "An engine closed during its L2 writes").
The chart's L2 plugin (podscripts/l2_connector.py) holds that free until its own chunk reads and writes end.

Measured on LMCache's own engine, storage manager and plugin loader (tests/harness/engine/lmcache_probe.py,
fault close_during_l2_write): the plugin's writes start 2 s late in their threads, and once every chunk's
write has started the engine is destroyed, as LMCache's vLLM connector destroys it when the worker shuts
down. Without the guard the probe dies of SIGSEGV and run_cases raises, naming the signal, with its stderr."""

from __future__ import annotations

from pathlib import Path

from harness.engine import invariants
from kvtier.engine_rig import rendered, tiers
from kvtier.podscripts import l2_integrity

TINY = {"layers": 2, "kv_heads": 2, "head_size": 64}
TOKENS = invariants.prompt_tokens(600, seed=17)  # two whole chunks of 256
# One sealed chunk file of TINY in values/cpu.yaml's dtype (bfloat16): K+V x layers x heads x dims x 2 bytes
# x 256 tokens + LMCache's 28-byte header + the integrity trailer.
CHUNK_BYTES = 2 * 2 * 2 * 64 * 2 * 256 + 28 + l2_integrity.TRAILER_BYTES


def test_an_engine_closed_during_its_l2_writes_lets_them_finish_whole(work: Path) -> None:
    engine = rendered.render_engine([tiers.CPU_VALUES], {}, work / "render")  # the chart's defaults
    pod = invariants.pod_case(engine, work / "l2", work / "pod", TINY)
    config = Path(pod.case["config"]).read_text()
    assert "KvtierFSConnector" in config and "remote_url" not in config, "the chart's plugin writes the L2"
    case = {**pod.case, "tokens": TOKENS, "kv_seed": 4}
    (stored,) = invariants.run_cases(
        [{**case, "action": "store", "fault": "close_during_l2_write"}], pod.seed, work
    )
    assert stored["error"] is None and stored["stored_files"] == 2, stored
    files = list(pod.l2_dir.glob("*"))
    assert {f.suffix for f in files} == {".data"}, "no write was cut short (a .tmp left behind)"
    assert {f.stat().st_size for f in files} == {CHUNK_BYTES}, "every chunk file sealed whole"
    # What the writes read was the stored KV, not freed memory: another pod verifies and loads it.
    (found,) = invariants.run_cases([{**case, "action": "lookup"}], pod.seed, work)
    assert found["error"] is None and found["hit_tokens"] == 512 and found["data_ok"] is True, found
