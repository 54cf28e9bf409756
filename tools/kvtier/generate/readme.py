"""Chart READMEs: the pinned helm-docs renders `README.md.gotmpl` with the `# --` comments of values.yaml.

helm-docs writes next to the chart it reads, so it runs on a copy in a temporary directory and the
text comes back: `kvtier generate --check` stays read-only. helm-docs reports template errors only as
log warnings (exit code 0), so any warning here is an error.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kvtier import paths, toolchain
from kvtier.errors import UserError

TEMPLATE = "README.md.gotmpl"
# What helm-docs reads from a chart; nothing else is copied.
INPUTS = ("Chart.yaml", "values.yaml", TEMPLATE)
OPTIONS = ("--sort-values-order", "file", "--skip-version-footer", "--log-level", "warning")


def charts() -> list[Path]:
    return sorted(p.parent for p in paths.CHARTS.glob(f"*/{TEMPLATE}") if (p.parent / "Chart.yaml").is_file())


def render(chart: Path) -> str:
    binary = toolchain.pinned("helm-docs")
    with tempfile.TemporaryDirectory(prefix="kvtier-readme-") as tmp:
        copy = Path(tmp) / chart.name
        copy.mkdir()
        for name in INPUTS:
            if (chart / name).is_file():
                shutil.copy2(chart / name, copy / name)
        result = subprocess.run(
            [str(binary), "--chart-search-root", tmp, "--template-files", TEMPLATE, *OPTIONS],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp,
        )
        output = copy / "README.md"
        problems = (result.stderr + result.stdout).strip()
        if result.returncode != 0 or problems or not output.is_file():
            raise UserError(f"helm-docs could not render {chart / TEMPLATE}: {problems or 'no output'}")
        return output.read_text()


def expected() -> Iterator[tuple[Path, str]]:
    for chart in charts():
        yield chart / "README.md", render(chart)
