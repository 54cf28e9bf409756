"""L1 and L2 for real on CPU: two vLLM replicas started from values/cpu.yaml's rendered container share KV
through LMCache's fs connector on one directory (kvtier.engine_rig.tiers). LMCache's engine, L1 and L2 are
its own; only the paged-KV copy is our stand-in (tools/lmcache-cpu-copy, checked against vLLM's kernel in
test_cpu_copy_adapter.py). Timings are printed, never asserted (benchmarks/ compare them side by side)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kvtier import waiting
from kvtier.bench import report
from kvtier.engine_rig import processes, router_flags, tiers
from kvtier.engine_rig import rig as engine_rig
from kvtier.monitoring import names
from kvtier.plan import capacity
from kvtier.podscripts import kvcheck, l2_integrity

HEADER_BYTES = 28  # LMCache's chunk-file header (length, format, dtype, shape), ../shared/DESIGN.md section 4
TRAILER_BYTES = l2_integrity.TRAILER_BYTES  # cache.l2.integrity (values/cpu.yaml keeps the default, on)


pytestmark = pytest.mark.tiered_rig("lmcache")


@pytest.fixture(scope="module")
def tiered(tiered_rig) -> tiers.TieredRig:
    return tiered_rig("lmcache")


@pytest.fixture(scope="module")
def measured(tiered: tiers.TieredRig) -> dict[str, Any]:
    result = tiers.measure_tiers(tiered, words=2000)
    Console().print(report.tiers_table(result))
    print(report.tiers_summary(result))
    return result


def test_the_rig_runs_the_chart_rendered_container(tiered: tiers.TieredRig) -> None:
    assert tiered.engine is not None
    args = tiered.engine.args
    assert args[0] == "serve" and "--gpu-memory-utilization" not in args
    assert '"kv_load_failure_policy":"recompute"' in args[args.index("--kv-transfer-config") + 1]
    assert tiered.engine.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    # The L2 directory each replica uses is the model's namespace inside the one shared volume.
    assert tiered.l2_dir is not None and tiered.l2_dir.parent == tiered.work_dir / "l2"
    assert tiered.l2_dir.name.startswith(f"{engine_rig.MODEL_NAME}.")


def test_other_replica_hits_whole_chunks_from_l2_with_identical_output(measured: dict[str, Any]) -> None:
    cold, _l0, l2, _gone, _reference = measured["table"]
    whole_chunks = measured["prompt_tokens"] // measured["chunk_size"] * measured["chunk_size"]
    assert cold["hit_tokens"] == 0
    assert l2["hit_tokens"] == whole_chunks > 0, (
        "replica 1's first request must load every whole chunk from L2"
    )
    assert measured["identical_outputs"], "greedy output differs between the cold and the L2-hit path"


def test_a_removed_l2_file_is_a_clean_recompute(measured: dict[str, Any], tiered: tiers.TieredRig) -> None:
    gone = measured["table"][3]
    assert gone["hit_tokens"] == 0  # nothing loaded, nothing failed: the request was served from scratch
    # The engine keeps serving after it.
    answer = kvcheck.stream_completion(
        tiered.started[1].url, engine_rig.MODEL_NAME, "health check", max_tokens=2
    )
    assert answer["text"]


def test_chunk_files_are_the_planners_bytes_per_token_times_chunk_plus_header_and_trailer(
    measured: dict[str, Any], tiered: tiers.TieredRig
) -> None:
    files = tiered.chunk_files()
    assert files, "no chunk files in L2"
    spec = capacity.load_model_config(tiered.work_dir / "models" / engine_rig.MODEL_NAME / "config.json")
    deployment = capacity.Deployment(spec, 4, 4, chunk=measured["chunk_size"])  # float32 KV, sealed
    expected = spec.kv_bytes_per_token(4) * measured["chunk_size"] + HEADER_BYTES + TRAILER_BYTES
    assert capacity.chunk_file_bytes(deployment) == expected
    sizes = {path.stat().st_size for path in files}
    assert sizes == {expected}, f"chunk files {sorted(sizes)} bytes, planner says {expected}"
    # The header's first field is the payload length LMCache reads back; the seal follows it.
    (length,) = struct.unpack("<i", Path(files[0]).read_bytes()[:4])
    assert length == expected - HEADER_BYTES - TRAILER_BYTES
    assert seal_problem(Path(files[0])) is None


def seal_problem(path: Path) -> str | None:
    """Why the chunk file at `path` is not sealed for its own key (None: it is), read by the header's
    length: the key is LMCache's key string, which the file name spells with "-SEP-" for "/"."""
    data = path.read_bytes()
    (length,) = struct.unpack("<i", data[:4])
    key = path.name.removesuffix(".data").replace("-SEP-", "/")
    body = data[HEADER_BYTES : HEADER_BYTES + length]
    return l2_integrity.problem(key, data[:HEADER_BYTES], body, data[HEADER_BYTES + length :])


def test_helm_tests_crosspod_check_passes_on_the_rendered_engines(
    measured: dict[str, Any], tiered: tiers.TieredRig
) -> None:
    # The check `helm test` runs in the cluster (kvcheck.py), here against the two rendered replicas.
    del measured  # runs after the measurement, so its fresh prompts do not disturb the table
    a, b = (process.url for process in tiered.started)
    outcome = kvcheck.check_crosspod(a, b, engine_rig.MODEL_NAME, words=1200, settle_s=2)
    print(f"[lmcache] crosspod: {outcome['summary']}; A's L2 writes: {outcome['a_l2_writes']}")
    assert outcome["ok"] is True, outcome["summary"]
    assert outcome["b"]["external_hit_tokens"] >= 1024


def _answer_and_middle_chunk(tiered: tiers.TieredRig, prompt: str) -> tuple[dict[str, Any], Path]:
    """Replica 0's answer to a fresh `prompt`, once its chunks are in L2, and the middle one of them."""
    before = set(tiered.chunk_files())
    first = kvcheck.stream_completion(tiered.started[0].url, engine_rig.MODEL_NAME, prompt, max_tokens=8)
    tokens = tiers.prompt_tokens(tiered.started[0].url, prompt)
    tiered.wait_for_chunks(len(before) + tokens // tiered.chunk_size)
    written = sorted((p for p in tiered.chunk_files() if p not in before), key=lambda p: p.stat().st_mtime_ns)
    return first, written[len(written) // 2]


def test_a_broken_chunk_file_is_recomputed_not_a_failed_request(
    measured: dict[str, Any], tiered: tiers.TieredRig
) -> None:
    """kv_load_failure_policy recompute, as the chart renders it, on the real engines: replica 1 finds the
    chunks, one of them cannot be read, and the request is still served with replica 0's output."""
    del measured
    prompt = kvcheck.long_prompt(1500)
    first, broken = _answer_and_middle_chunk(tiered, prompt)
    broken.write_bytes(broken.read_bytes()[:1000])  # a torn chunk in the middle of the prompt
    second = kvcheck.stream_completion(tiered.started[1].url, engine_rig.MODEL_NAME, prompt, max_tokens=8)
    assert second["text"] == first["text"], "the recomputed answer differs from the first replica's"
    log = tiered.started[1].log.read_text(errors="replace")
    assert broken.name in log, "LMCache's failed read should name the file in the engine log"


def test_a_chunk_changed_in_place_is_a_miss_and_the_next_store_heals_it(
    measured: dict[str, Any], tiered: tiers.TieredRig
) -> None:
    """cache.l2.integrity on the real engines: a chunk whose KV bytes changed after it was written (same
    size, header intact: what LMCache's own reader loads as KV, test_l2_failures.py) is refused, the
    request is served with replica 0's answer, and replica 1's store of the recomputed chunk seals a good
    file under the same name."""
    del measured
    prompt = kvcheck.long_prompt(1500) + " changed in place"
    first, changed = _answer_and_middle_chunk(tiered, prompt)
    data = bytearray(changed.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    changed.write_bytes(bytes(data))
    second = kvcheck.stream_completion(tiered.started[1].url, engine_rig.MODEL_NAME, prompt, max_tokens=8)
    assert second["text"] == first["text"], "the answer after a refused chunk differs from replica 0's"
    log = tiered.started[1].log.read_text(errors="replace")
    assert f"{changed} failed verification (mismatch), served as a miss and removed" in log
    waiting.wait_until(  # replica 1 stores the chunk it recomputed: a sealed file under the same name
        lambda: seal_problem(changed) is None,
        deadline=waiting.deadline_in(30),
        fail=lambda last: AssertionError(f"{changed.name} was not stored again after it was refused{last}"),
        tolerate=(FileNotFoundError,),
        interval=0.2,
    )


def _served_names(url: str) -> set[str]:
    """Sample names of one /metrics page (what a PromQL selector matches)."""
    text = kvcheck.http_text(url)
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and line[0] != "#"}


def test_the_metrics_the_alerts_and_dashboard_read_are_served(
    measured: dict[str, Any], tiered: tiers.TieredRig
) -> None:
    """Every vLLM and vllm-router name in kvtier.monitoring.names, scraped from the real processes: the
    chart-rendered replicas (after traffic, so every counter exists) and the router in front of them."""
    del measured
    engine_names = set().union(*(_served_names(p.url + "/metrics") for p in tiered.started))
    missing = names.by_exporter(names.VLLM) - engine_names
    assert missing == set(), f"vLLM does not serve {sorted(missing)}"
    assert not any(n.startswith("lmcache:") for n in engine_names), (
        "vLLM's /metrics now serves LMCache's counters: the dashboard can use them (docs/alerts.md)"
    )
    flags, _source = router_flags.router_flags("prefixaware")
    port, metrics_port = processes.free_port(), processes.free_port()
    argv = engine_rig.router_argv(flags, [p.url for p in tiered.started], port, metrics_port)
    with engine_rig.running_router(argv, port, "metrics", tiered.work_dir) as url:
        kvcheck.stream_completion(url, engine_rig.MODEL_NAME, "metrics check", max_tokens=2)
        router_names = _served_names(f"http://127.0.0.1:{metrics_port}/metrics")
    missing = names.by_exporter(names.ROUTER) - router_names
    assert missing == set(), f"vllm-router does not serve {sorted(missing)}"
