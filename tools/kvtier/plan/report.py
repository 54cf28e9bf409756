"""Human output of `kvtier plan`: the model line, tier capacities, per-prompt times, reference check."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from kvtier.plan.facts import GIB


def print_table(result: dict[str, Any]) -> None:
    console = Console(width=max(Console().width, 120))
    for m in result["models"]:
        console.print(
            f"[bold]{m['name']}[/bold] ({m['model']}): {m['kv_formula']} = [bold]{m['kv_bytes_per_token']:,} "
            f"B/token[/bold]; weights {m['weights_gib']:.2f} GiB ({m['params'] / 1e9:.2f}B params)"
        )
        console.print(
            f"  backend {m['backend']}: one L2 file per {m['chunk_tokens']}-token chunk, "
            f"{m['chunk_file_bytes']:,} B"
        )
        for note in m["notes"]:
            console.print(f"  note: {note}", style="yellow", markup=False)
        tiers = Table(title="capacity (L0, L1 per replica; L2 shared)", title_justify="left")
        for col in (
            "tier",
            "GiB",
            "tokens",
            *(f"prompts of {n}" for n in next(iter(m["tiers"].values()))["prompts"]),
        ):
            tiers.add_column(col, justify="right")
        for tier, v in m["tiers"].items():
            tiers.add_row(
                tier,
                f"{v['bytes'] / GIB:,.2f}",
                f"{v['tokens']:,.0f}",
                *(f"{p:,.0f}" for p in v["prompts"].values()),
            )
        console.print(tiers)
        t = m["timing"]
        rows = Table(
            title=f"per prompt (L2 write {t['write_gib_s']} GiB/s, read {t['read_gib_s']:g} GiB/s, the "
            f"{t['read_source'].partition(':')[0] or 'given'} figure; prefill "
            f"{t['prefill_tps']:,.0f} tok/s, request {t['request_ms']:.0f} ms, hit {t['hit_ms']:.0f} ms; "
            f"calibration: {t['calibration']})",
            title_justify="left",
        )
        for col in (
            "tokens",
            "KV GiB",
            "L2 write ms",
            "L2 read ms",
            "TTFT cold ms",
            "TTFT L2 hit ms",
            "speedup",
        ):
            rows.add_column(col, justify="right")
        for r in m["prompts"]:
            rows.add_row(
                f"{r['tokens']:,}",
                f"{r['kv_gib']:.4f}",
                f"{r['l2_write_ms']:.2f}",
                f"{r['l2_read_ms']:.2f}",
                f"{r['cold_ttft_ms']:.0f}",
                f"{r['hit_ttft_ms']:.0f}",
                f"{r['speedup']:.2f}x",
            )
        console.print(rows)
        estimate = m.get("prefill_estimate")
        if estimate:
            style = "yellow" if estimate["fell_back"] else None
            console.print(f"prefill: {estimate['description']}", style=style, markup=False)
        be = m["break_even_tokens"]
        console.print(
            f"break-even prompt length: {be:,.0f} tokens (below it, recomputing beats an L2 hit)"
            if be is not None
            else "break-even: never (reading from L2 is slower than prefill per token)"
        )
        print_read_speeds(console, m.get("l2_read_speeds", []))
        for r in m.get("reference_check", []):
            verdict = "within 20%" if "missing_term" not in r else f"outside 20%: {r['missing_term']}"
            console.print(
                f"  reference {r['tokens']:>5} tokens: measured {r['measured']:.2f}x, predicted "
                f"{r['predicted']:.2f}x ({r['off']:+.0%}) {verdict}"
            )
        if "scale" in m:
            print_scale(console, m["scale"])


def print_read_speeds(console: Console, speeds: list[dict[str, Any]]) -> None:
    """Each cross-node read speed with its source, break-even length and one chunk's read vs prefill."""
    if not speeds:
        return
    console.print("L2 cross-node read speeds (the tables above use the last one):")
    for s in speeds:
        be = s["break_even_tokens"]
        verdict = f"break-even {be:,.0f} tokens" if be is not None else "break-even never"
        console.print(
            f"  {s['name']} {s['gib_s']:g} GiB/s: {verdict}; one chunk read {s['chunk_read_ms']:.1f} ms "
            f"vs its prefill {s['chunk_prefill_ms']:.1f} ms",
            markup=False,
        )
        console.print(f"    source: {s['source']}", style="dim", markup=False)


def _qps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_scale(console: Console, s: dict[str, Any]) -> None:
    hw = s["hardware"]
    said = "assumed: give --worker-disk-gib-s and --nic-gbps" if hw["assumed"] else "given"
    console.print(
        f"[bold]scale on paper[/bold]: a worker serves min(NVMe {hw['worker_disk_gib_s']:g} GiB/s, NIC "
        f"{hw['nic_gbps']:g} Gbit/s) = {hw['worker_gib_s']:.2f} GiB/s ({said}), sized to "
        f"{hw['target_utilization']:.0%} of it"
    )
    console.print(
        f"  an L2 read beats recomputing while it gets >= {_gib(s['break_even_stream_gib_s'])} GiB/s "
        "(KV bytes per token x prefill rate); concurrent reads that get it: "
        + ", ".join(f"{n} on {w} worker(s)" for w, n in s["reads_above_break_even"].items())
    )
    for name, case in s["cases"].items():
        mix = case["mix"]
        title = (
            f"{name}: {mix['prompt_tokens']:,.0f}-token prompts, L0 {mix['l0_share']:.0%}, L1/L2 "
            f"{mix['connector_share']:.0%}, computed {mix['computed_share']:.0%} ({mix['source']}); "
            f"per request L2 read {case['read_mib_per_request']:.1f} MiB, "
            f"write {case['write_mib_per_request']:.1f} MiB; "
            f"a replica serves {_qps(case['replica_qps'])} QPS ({case['replica_qps_source']})"
        )
        table = Table(title=title, title_justify="left")
        for col in (
            "replicas",
            "workers",
            "replicas' QPS",
            "L2 saturates at QPS",
            "first to saturate",
            "L2 read GiB/s",
            "L2 write GiB/s",
            "workers needed",
        ):
            table.add_column(col, justify="right")
        for r in case["rows"]:
            table.add_row(
                str(r["replicas"]),
                str(r["workers"]),
                _qps(r["replicas_qps"]),
                _qps(r["l2_saturation_qps"]),
                r["bottleneck"],
                _gib(r["l2_read_gib_s"]),
                _gib(r["l2_write_gib_s"]),
                "-" if r["workers_needed"] is None else str(r["workers_needed"]),
            )
        console.print(table)
        nic = case["rows"][0]["replica_nic_share"] if case["rows"] else None
        if nic is not None:
            console.print(f"  each replica's L2 reads use {nic:.0%} of its NIC at its QPS")
    chunks = Table(
        title=f"chunk size at {s['chunks']['replicas']} replicas (measured mix): fewer files vs reuse lost "
        "inside a chunk",
        title_justify="left",
    )
    for col in ("chunk tokens", "file MiB", "files/request", "file ops/s", "reuse lost/request"):
        chunks.add_column(col, justify="right")
    for c in s["chunks"]["rows"]:
        chunks.add_row(
            str(c["chunk_tokens"]),
            f"{c['file_bytes'] / 2**20:.1f}",
            f"{c['files_per_request']:.1f}",
            "-" if c["file_ops_per_s"] is None else f"{c['file_ops_per_s']:,.0f}",
            f"{c['reuse_lost_share']:.1%}",
        )
    console.print(chunks)
