"""The table of the pinned vLLM's `vllm serve` options (kvtier.upstream.vllm_options' facts), dumped by
engine_rig/vllm_options_dump.py in the engine venv. `kvtier generate` rewrites it when the engine venv is
there; without it the committed table stays (tests/engine/test_vllm_options_table.py checks it is fresh)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from kvtier import paths
from kvtier.engine_rig import rig
from kvtier.engine_rig.errors import RigError
from kvtier.upstream import vllm_options

DUMP = Path(rig.__file__).with_name("vllm_options_dump.py")
TIMEOUT = 600


def write() -> str:
    """Dump the table where it is stale; what happened, in one line. Raises RigError when the dump fails."""
    where = vllm_options.TABLE.relative_to(paths.ROOT)
    try:
        python = rig.engine_python()
    except RigError as error:
        return f"kept {where}: not regenerated ({error})"
    with tempfile.TemporaryDirectory(prefix="kvtier-vllm-table-") as folder:
        out = Path(folder) / vllm_options.TABLE.name
        run = subprocess.run(
            [str(python), str(DUMP), str(out)], capture_output=True, text=True, timeout=TIMEOUT
        )
        if run.returncode != 0:
            raise RigError(f"{DUMP.name} failed (exit {run.returncode}): {run.stderr.strip()[-2000:]}")
        text = out.read_text()
    if vllm_options.TABLE.exists() and vllm_options.TABLE.read_text() == text:
        return ""
    vllm_options.TABLE.write_text(text)
    return f"wrote {where}"
