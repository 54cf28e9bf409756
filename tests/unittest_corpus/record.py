"""Record the real helm-unittest's verdict for every case of the corpus into verdicts.json.

Run after changing the corpus: `.venv/bin/python tests/unittest_corpus/record.py`. The plugin is
then checked against these verdicts (tests/charts/test_plugin_vs_helm_unittest.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kvtier.unittest_reference import junit_verdicts

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def main() -> int:
    binary = ROOT / ".tools" / "bin" / "helm-unittest"
    if not binary.exists():
        print(f"helm-unittest is not built at {binary}; run `make tools`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "corpus"
        shutil.copytree(HERE / "corpus", chart)
        report = Path(tmp) / "report.xml"
        cmd = [str(binary), "-f", "tests/*_test.yaml", "-t", "JUnit", "-o", str(report), str(chart)]
        subprocess.run(cmd, capture_output=True, check=False)
        verdicts = {f"{suite}::{case}": verdict for suite, case, verdict in junit_verdicts(report)}
    (HERE / "verdicts.json").write_text(json.dumps(verdicts, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(verdicts)} verdicts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
