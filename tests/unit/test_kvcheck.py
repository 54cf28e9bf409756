"""kvcheck.py: each check's pass and fail, and clear errors from bad endpoints (stand-ins on 127.0.0.1)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_kvcheck_fakes import FakeReplica, as_json, as_text, closed_port_url, serve, sse, token

from kvtier.podscripts import kvcheck

SCRIPT = Path(kvcheck.__file__)
MODELS = {"object": "list", "data": [{"id": "tiny", "object": "model"}]}


def run_cli(*args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) <= 1, proc.stdout
    return proc.returncode, (json.loads(lines[0]) if lines else {"stderr": proc.stderr})


# --- the pod-script contract ---------------------------------------------------------------------


def test_script_is_python39_standard_library_only() -> None:
    tree = ast.parse(SCRIPT.read_text(), feature_version=(3, 9))
    imported = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


def test_cli_usage_error_exits_2() -> None:
    code, out = run_cli("crosspod", "--a", "http://127.0.0.1:1")
    assert code == 2
    assert "required" in out["stderr"]


def test_cli_pass_prints_one_json_line_and_exits_0(tmp_path: Path) -> None:
    (tmp_path / "k1.data").write_bytes(b"kv" * 10)
    code, out = run_cli("l2-files", "--dir", str(tmp_path))
    assert (code, out["ok"], out["check"], out["chunks"]) == (0, True, "l2-files", 1)


def test_cli_refused_connection_is_a_failed_check_not_a_traceback() -> None:
    code, out = run_cli("router", "--url", closed_port_url())
    assert code == 1
    assert out["ok"] is False
    assert "connection refused" in out["summary"]


# --- router / completion -------------------------------------------------------------------------


def test_router_healthy_with_models() -> None:
    with serve({("GET", "/health"): as_text("ok"), ("GET", "/v1/models"): as_json(MODELS)}) as s:
        outcome = kvcheck.check_router(s.url)
    assert outcome["ok"] and outcome["models"] == ["tiny"]


def test_router_without_models_fails() -> None:
    with serve({("GET", "/health"): as_text("ok"), ("GET", "/v1/models"): as_json({"data": []})}) as s:
        outcome = kvcheck.check_router(s.url)
    assert not outcome["ok"] and "lists no model" in outcome["summary"]


def test_router_unhealthy_names_status_and_body() -> None:
    with (
        serve({("GET", "/health"): as_text("no workers", status=503)}) as s,
        pytest.raises(kvcheck.CheckError, match=r"/health: HTTP 503 .*no workers"),
    ):
        kvcheck.check_router(s.url)


def test_timeout_is_reported_with_its_limit() -> None:
    with serve({("GET", "/health"): as_text("ok")}) as s:
        s.delay_s = 2.0
        with pytest.raises(kvcheck.CheckError, match=r"no answer within 0.3 s"):
            kvcheck.check_router(s.url, timeout=0.3)


def test_models_not_json_is_reported() -> None:
    with (
        serve({("GET", "/health"): as_text("ok"), ("GET", "/v1/models"): as_text("<html>")}) as s,
        pytest.raises(kvcheck.CheckError, match="not JSON"),
    ):
        kvcheck.check_router(s.url)


def test_not_a_url_is_reported() -> None:
    with pytest.raises(kvcheck.CheckError, match="not an http"):
        kvcheck.check_router("router:8000")


def test_completion_pass_and_empty_answer() -> None:
    good = {"choices": [{"text": " tier"}], "usage": {"completion_tokens": 8}}
    with serve({("POST", "/v1/completions"): as_json(good)}) as s:
        assert kvcheck.check_completion(s.url, "tiny")["tokens"] == 8
    with serve({("POST", "/v1/completions"): as_json({"choices": []})}) as s:
        assert not kvcheck.check_completion(s.url, "tiny")["ok"]


# --- streaming -----------------------------------------------------------------------------------


def test_stream_measures_ttft_before_total() -> None:
    events = sse(token("a"), token("b"))
    with serve({("POST", "/v1/completions"): lambda _r: (200, "text/event-stream", events)}) as s:
        s.first_chunk_delay_s = 0.2
        timing = kvcheck.stream_completion(s.url, "tiny", "hello")
    assert 0.2 <= timing["ttft_s"] <= timing["total_s"]
    assert timing["text"] == "ab"


def test_non_streaming_server_is_a_clear_error() -> None:
    with (
        serve({("POST", "/v1/completions"): as_json({"choices": [{"text": "x"}]})}) as s,
        pytest.raises(kvcheck.CheckError, match="instead of a stream"),
    ):
        kvcheck.stream_completion(s.url, "tiny", "hello")


def test_stream_without_tokens_and_with_error_event() -> None:
    with (
        serve({("POST", "/v1/completions"): lambda _r: (200, "text/event-stream", sse())}) as s,
        pytest.raises(kvcheck.CheckError, match="without a token"),
    ):
        kvcheck.stream_completion(s.url, "tiny", "hello")
    broken = sse({"error": {"message": "model not found"}})
    with (
        serve({("POST", "/v1/completions"): lambda _r: (200, "text/event-stream", broken)}) as s,
        pytest.raises(kvcheck.CheckError, match="model not found"),
    ):
        kvcheck.stream_completion(s.url, "tiny", "hello")


# --- metrics -------------------------------------------------------------------------------------

METRICS = """# HELP vllm:prefix_cache_hits_total hits
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 120.0
vllm:prefix_cache_hits_total{engine="1",model_name="tiny"} 8.0
vllm:prefix_cache_hits_created{engine="0",model_name="tiny"} 1.7e9
lmcache:num_hit_tokens_total 256
vllm:num_requests_running 1
"""


def test_parse_metrics_sums_label_sets_and_folds_total() -> None:
    parsed = kvcheck.parse_metrics(METRICS)
    assert parsed["vllm:prefix_cache_hits"] == 128.0
    assert parsed["lmcache:num_hit_tokens"] == 256.0
    assert parsed["vllm:num_requests_running"] == 1.0
    assert "vllm:prefix_cache_hits_created" not in parsed


def test_tier_deltas_by_tier_and_none_for_missing_metrics() -> None:
    before = kvcheck.parse_metrics(METRICS)
    after = dict(before, **{"vllm:prefix_cache_hits": 200.0, "lmcache:num_hit_tokens": 512.0})
    deltas = kvcheck.tier_deltas(before, after)
    assert deltas["l0_hit_tokens"] == 72.0
    assert deltas["external_hit_tokens"] == 256.0
    assert deltas["l2_reads"] is None and deltas["requests"] is None


def test_a_counter_lower_than_before_was_reset_and_counts_from_zero() -> None:
    # An engine restarted between the scrapes (the soak's killed engine): as PromQL's increase() reads it.
    before = {"vllm:prefix_cache_hits": 5000.0, "vllm:external_prefix_cache_hits": 900.0}
    after = {"vllm:prefix_cache_hits": 300.0, "vllm:external_prefix_cache_hits": 1000.0}
    deltas = kvcheck.tier_deltas(before, after)
    assert deltas["l0_hit_tokens"] == 300.0 and deltas["external_hit_tokens"] == 100.0


def test_metrics_endpoint_without_samples_is_reported() -> None:
    with (
        serve({("GET", "/metrics"): as_text("<html>hello</html>")}) as s,
        pytest.raises(kvcheck.CheckError, match="no Prometheus samples"),
    ):
        kvcheck.read_metrics(s.url + "/metrics")


# --- crosspod ------------------------------------------------------------------------------------


def _crosspod(b_hits: int | None, b_delay: float) -> dict:
    a, b = FakeReplica(), FakeReplica(hit_tokens=b_hits)
    with serve(a.routes()) as sa, serve(b.routes()) as sb:
        sa.first_chunk_delay_s, sb.first_chunk_delay_s = 0.25, b_delay
        outcome = kvcheck.check_crosspod(sa.url, sb.url, "tiny", words=50, settle_s=0)
    assert (a.requests, b.requests) == (1, 1)
    return outcome


def test_crosspod_passes_when_b_hits_and_is_faster() -> None:
    outcome = _crosspod(b_hits=1024, b_delay=0.0)
    assert outcome["ok"], outcome
    assert outcome["b"]["external_hit_tokens"] == 1024
    assert outcome["ttft_b_s"] < outcome["ttft_a_s"]


def test_crosspod_fails_without_hits() -> None:
    outcome = _crosspod(b_hits=0, b_delay=0.0)
    assert not outcome["ok"] and "no KV connector hit tokens" in outcome["summary"]


def test_crosspod_judges_the_hits_and_only_reports_a_slower_b() -> None:
    outcome = _crosspod(b_hits=1024, b_delay=0.5)
    assert outcome["ok"], outcome
    assert outcome["ttft_b_s"] > outcome["ttft_a_s"] and "B not faster than A" in outcome["summary"]


def test_crosspod_names_the_missing_lmcache_metric() -> None:
    outcome = _crosspod(b_hits=None, b_delay=0.0)
    assert not outcome["ok"] and "PROMETHEUS_MULTIPROC_DIR" in outcome["summary"]


def _crosspod_through_l2(write_s: float, write_wait_s: float) -> dict:
    """A's answer lands in the shared L2 `write_s` after it; B hits only what has landed."""
    l2: set[str] = set()
    a, b = FakeReplica(l2=l2, write_s=write_s), FakeReplica(hit_tokens=1024, l2=l2)
    with serve(a.routes()) as sa, serve(b.routes()) as sb:
        return kvcheck.check_crosspod(sa.url, sb.url, "tiny", words=50, settle_s=0, write_wait_s=write_wait_s)


def test_crosspod_asks_b_once_as_writes_have_landed() -> None:
    outcome = _crosspod_through_l2(write_s=1.5, write_wait_s=10)
    assert outcome["ok"], outcome
    writes = outcome["a_l2_writes"]
    assert writes["landed"] is True and writes["metric"] == "vllm:kv_offload_tiering_write_bytes"
    assert 1.0 <= writes["waited_s"] < 10, writes


def test_crosspod_names_writes_that_never_landed() -> None:
    outcome = _crosspod_through_l2(write_s=60, write_wait_s=0.5)
    assert not outcome["ok"]
    assert outcome["a_l2_writes"]["landed"] is False and outcome["a_l2_writes"]["pending"] == 1
    assert "A's writes to L2 had not landed" in outcome["summary"], outcome["summary"]


@pytest.mark.parametrize(
    ("before", "now", "landed"),
    [
        (4096, 8192, True),  # a write landed
        (4096, 4096, False),  # none within the limit
        (65536, 0, False),  # the engine restarted and has written nothing yet
        (65536, 4096, True),  # restarted, and its new counter has counted a write
    ],
)
def test_a_write_has_landed_once_the_counter_moved_and_nothing_is_under_way(
    before: int, now: int, landed: bool
) -> None:
    metrics = (
        f'vllm:kv_offload_tiering_write_bytes_total{{tier="1:fs"}} {now}.0\n'
        'vllm:kv_offload_tiering_active_cascade_jobs{tier="1:fs"} 0.0\n'
    )
    with serve({("GET", "/metrics"): as_text(metrics)}) as s:
        outcome = kvcheck.wait_for_l2_writes(
            s.url + "/metrics", {"vllm:kv_offload_tiering_write_bytes": float(before)}, limit_s=0.3
        )
    assert outcome["landed"] is landed, outcome


def test_crosspod_without_write_metrics_falls_back_to_the_settle_pause() -> None:
    outcome = _crosspod(b_hits=1024, b_delay=0.0)
    assert outcome["a_l2_writes"] == {"landed": None, "waited_s": outcome["a_l2_writes"]["waited_s"]}
    assert outcome["a_l2_writes"]["waited_s"] < 1


def test_long_prompt_starts_with_its_nonce() -> None:
    one, two = kvcheck.long_prompt(100), kvcheck.long_prompt(100)
    assert one.split()[:2] != two.split()[:2]
    assert len(one.split()) == 100
    assert kvcheck.long_prompt(100, "fixed") == kvcheck.long_prompt(100, "fixed")


# --- L2 files and Curvine ------------------------------------------------------------------------


def test_l2_files_counts_chunks_not_temp_files(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "a-SEP-1.data").write_bytes(b"x" * 2048)
    (tmp_path / "model" / "a-SEP-2.data.tmp").write_bytes(b"x")
    outcome = kvcheck.check_l2_files(str(tmp_path))
    assert outcome["ok"] and outcome["chunks"] == 1 and outcome["bytes"] == 2048
    assert not kvcheck.check_l2_files(str(tmp_path), minimum=2)["ok"]


def test_l2_files_counts_the_native_fs_tier_layout(tmp_path: Path) -> None:
    # vLLM's fs tier: <root>/<model>_<12 hex>_r0/<3 hex>/<2 hex>_g0/<hash>.bin, config.json beside.
    folder = tmp_path / "qwen.0123456789ab" / "_m_qwen_0123456789ab_r0" / "abc" / "de_g0"
    folder.mkdir(parents=True)
    (folder / "abcde1.bin").write_bytes(b"x" * 4096)
    (folder / "abcde2.bin_9f8e7d.tmp").write_bytes(b"x")  # a write before its rename
    (tmp_path / "qwen.0123456789ab" / "_m_qwen_0123456789ab").mkdir()
    (tmp_path / "qwen.0123456789ab" / "_m_qwen_0123456789ab" / "config.json").write_text("{}")
    outcome = kvcheck.check_l2_files(str(tmp_path))
    assert outcome["ok"] and outcome["chunks"] == 1 and outcome["bytes"] == 4096


def test_l2_files_empty_directory_fails(tmp_path: Path) -> None:
    assert not kvcheck.check_l2_files(str(tmp_path))["ok"]


def test_curvine_overview_counts_live_workers() -> None:
    overview = {"live_workers": 2, "lost_workers": 1, "capacity": 10}
    with serve({("GET", "/api/overview"): as_json(overview)}) as s:
        assert kvcheck.check_curvine_workers(s.url, expect=2)["ok"]
        outcome = kvcheck.check_curvine_workers(s.url, expect=3)
    assert not outcome["ok"] and outcome["lost"] == 1


def test_curvine_falls_back_to_the_text_report() -> None:
    report = "Curvine cluster summary:\n    capacity: 1.00GB\n    live_workers: 3\n    lost_workers: 0\n"
    with serve({("GET", "/report"): as_text(report)}) as s:
        outcome = kvcheck.check_curvine_workers(s.url, expect=3)
    assert outcome["ok"] and outcome["live"] == 3


def test_curvine_without_worker_counts_is_reported() -> None:
    with (
        serve({("GET", "/report"): as_text("hello")}) as s,
        pytest.raises(kvcheck.CheckError, match="live_workers"),
    ):
        kvcheck.check_curvine_workers(s.url, expect=1)
