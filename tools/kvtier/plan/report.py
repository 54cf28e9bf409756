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
            title=f"per prompt (L2 write {t['write_gib_s']} GiB/s, read {t['read_gib_s']} GiB/s; prefill "
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
        be = m["break_even_tokens"]
        console.print(
            f"break-even prompt length: {be:,.0f} tokens (below it, recomputing beats an L2 hit)"
            if be is not None
            else "break-even: never (reading from L2 is slower than prefill per token)"
        )
        for r in m.get("reference_check", []):
            verdict = "within 20%" if "missing_term" not in r else f"outside 20%: {r['missing_term']}"
            console.print(
                f"  reference {r['tokens']:>5} tokens: measured {r['measured']:.2f}x, predicted "
                f"{r['predicted']:.2f}x ({r['off']:+.0%}) {verdict}"
            )
