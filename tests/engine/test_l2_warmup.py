"""The L2 warm-up (l2_warm.py, the chart's hook Job and `kvtier warm`) on real engines: two vLLM CPU
replicas of the container the chart renders for values/cpu.yaml on one shared L2, for each backend.

The oracle is the engines themselves: replica B's own counter of KV-connector hit tokens (B never computed
the prefix), the files in the namespace directory, vLLM's own chat template rendering of a longer
conversation, and the real eviction script over a copy of the namespace with the pins the warm-up wrote.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvtier.engine_rig import tiers
from kvtier.podscripts import kvcheck, l2_evict, l2_scan, l2_warm

CHART_SCRIPT = Path(tiers.rendered.CHART) / "files" / "podscripts" / "l2_warm.py"


def settings(rig: tiers.TieredRig, pin: bool = True) -> l2_warm.Settings:
    assert rig.l2_dir is not None
    return l2_warm.Settings(tiers.MODEL_NAME, rig.chunk_size, str(rig.l2_dir), pin, 60.0, 300.0)


def chat_tokens(url: str, messages: list[dict], generation_prompt: bool) -> list[int]:
    body = {"model": tiers.MODEL_NAME, "messages": messages, "add_generation_prompt": generation_prompt}
    return kvcheck.http_json(url + "/tokenize", body, 30)["tokens"]


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("lmcache", marks=pytest.mark.tiered_rig("lmcache")),
        pytest.param("vllm-native", marks=pytest.mark.tiered_rig("vllm-native")),
    ],
)
def test_warmed_prefixes_are_loaded_by_the_other_replica_and_pinned(tiered_rig, backend, tmp_path):
    rig = tiered_rig(backend)
    writer, verifier = (process.url for process in rig.started[:2])
    system = {"role": "system", "content": kvcheck.long_prompt(600)}
    rag = tmp_path / "rag.txt"
    rag.write_text(kvcheck.long_prompt(500))
    prefixes = [
        l2_warm.Prefix("support", text=kvcheck.long_prompt(700)),
        l2_warm.Prefix("chat", messages=[system, {"role": "user", "content": "Hello"}]),
        l2_warm.Prefix("rag", file=str(rag)),
        l2_warm.Prefix("short", text="Too short to fill a chunk."),
        l2_warm.Prefix("absent", file=str(tmp_path / "absent.txt")),
    ]
    outcomes, _ = l2_warm.warm(prefixes, [writer, verifier], settings(rig))
    by_name = {outcome.prefix: outcome for outcome in outcomes}

    for name in ("support", "chat", "rag"):
        outcome = by_name[name]
        assert outcome.verified, l2_warm.line(outcome)
        assert outcome.proof == "loaded"
        assert outcome.chunks >= 1 and outcome.written is not None and outcome.written >= outcome.chunks
        assert outcome.verified_tokens is not None
        assert outcome.verified_tokens >= outcome.chunks * rig.chunk_size
        pin = l2_warm.read_pin(str(rig.l2_dir), name)
        assert pin is not None and len(pin["files"]) == outcome.pinned == outcome.written
        assert all(l2_scan.is_chunk_file(f) and (rig.l2_dir / f).is_file() for f in pin["files"])
    assert "shorter than one" in by_name["short"].problem
    assert "does not exist" in by_name["absent"].problem
    summary = l2_warm.report(outcomes, [])["summary"]
    assert summary.startswith("3 of 5 prefixes warmed and verified")

    # The chat prefix is what a later conversation starting with those messages begins with, token for
    # token, by vLLM's own rendering of the model's chat template.
    later = [system, {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}]
    warmed = l2_warm.token_ids(writer, tiers.MODEL_NAME, prefixes[1], 30)
    assert chat_tokens(writer, [*later, {"role": "user", "content": "More"}], True)[: len(warmed)] == warmed

    # One replica: the write is all the warm-up can show, and it says so. (No pinning here: a pinning run
    # drops the pins of every prefix it was not given.)
    alone = l2_warm.Prefix("alone", text=kvcheck.long_prompt(600))
    (single,), _ = l2_warm.warm([alone], [writer], settings(rig, pin=False))
    assert single.verified and single.proof == "written" and single.written >= single.chunks >= 2
    assert "1 written only (one replica" in l2_warm.report([single], [])["summary"]

    # A re-run on the same pods (an upgrade that left the engines alone): B answers from its own prefix
    # cache, and the pinned files prove the L2 still holds the chunks; or, where B's small CPU KV cache
    # has dropped the prefix since, B loads it from L2 again.
    again, _ = l2_warm.warm(prefixes[:3], [writer, verifier], settings(rig))
    assert all(o.verified and o.already_cached and o.proof in ("files", "loaded") for o in again), again
    assert "files" in {o.proof for o in again}, "the first prefixes are still in B's prefix cache"
    assert [o.pinned for o in again] == [by_name[n].pinned for n in ("support", "chat", "rag")]

    # The real eviction script over a copy of the namespace, at watermarks that empty it: exactly the
    # pinned chunk files of the listed prefixes survive; "rag", no longer listed, is evicted.
    root = tmp_path / "l2"
    namespace = "tiny.0123456789ab"
    shutil.copytree(rig.l2_dir, root / namespace)
    listing = tmp_path / "pins.txt"
    listing.write_text(f"{namespace}/support\n{namespace}/chat\n")
    pins = l2_evict.read_pins(str(root), str(listing))
    report = l2_evict.evict(str(root), high="1", low="0", capacity="1Gi", pins=pins)
    kept = {p.relative_to(root / namespace).as_posix() for p in (root / namespace).rglob("*") if p.is_file()}
    kept_chunks = {name for name in kept if l2_scan.is_chunk_file(name)}
    expected = set(l2_warm.read_pin(str(rig.l2_dir), "support")["files"])
    expected |= set(l2_warm.read_pin(str(rig.l2_dir), "chat")["files"])
    assert kept_chunks == expected, report["summary"]
    assert report["pinned_files"] == len(expected)


@pytest.mark.tiered_rig("lmcache")
def test_the_chart_script_reports_and_fails_as_the_hook_needs(tiered_rig, tmp_path):
    """The chart's copy of l2_warm.py as the hook Job runs it (`python3 <folder>/l2_warm.py`: its imports
    come from beside it; -E -s keep this machine's environment and user site out): exit 0
    and one JSON line when every prefix is verified; 1, with the reason in the termination message, when
    one is not; 0 with a warning under --on-failure warn; 2 for a bad prefixes file."""
    rig = tiered_rig("lmcache")
    good = {"name": "system", "text": kvcheck.long_prompt(600)}
    short = {"name": "tiny", "text": "Too short."}
    termination = tmp_path / "termination-log"
    termination.write_text("")

    def run(entries, *extra: str) -> tuple[int, dict]:
        prefixes = tmp_path / "prefixes.json"
        prefixes.write_text(json.dumps({"prefixes": entries}) if entries is not None else "{broken")
        argv = [sys.executable, "-E", "-s", str(CHART_SCRIPT), "--prefixes", str(prefixes)]
        argv += ["--model", tiers.MODEL_NAME, "--chunk-tokens", str(rig.chunk_size)]
        argv += ["--namespace-dir", str(rig.l2_dir), "--termination-log", str(termination), *extra]
        for process in rig.started[:2]:
            argv += ["--replica", process.url]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert done.stdout.strip(), done.stderr
        return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])

    code, result = run([good], "--pin")
    assert code == 0 and result["ok"], result
    assert result["prefixes"][0]["verified"] and result["prefixes"][0]["proof"] == "loaded"
    code, result = run([short])
    assert code == 1 and not result["ok"]
    said = termination.read_text()
    assert said.startswith("0 of 1 prefixes warmed and verified from another replica; not verified: tiny: ")
    assert "shorter than one 256-token chunk" in said
    code, result = run([short], "--on-failure", "warn")
    assert code == 0 and result["summary"].startswith("WARNING")
    code, result = run(None)
    assert code == 2 and "not JSON" in result["summary"]
    assert "not JSON" in termination.read_text()
