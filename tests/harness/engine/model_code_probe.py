"""vLLM's own config step on model folders, what kvtier's model-code-trusted rule is measured against: for
each case, whether vllm.transformers_utils.config.get_config (what ModelConfig runs first, before any weight
is read) refuses the folder's config.json with the given trust_remote_code. Runs in the engine venv, by path:

    .venv-engine/bin/python tests/harness/engine/model_code_probe.py REQUEST.json

REQUEST: {"cases": [{"folder": PATH, "trust_remote_code": bool}]}; a folder holds config.json and any
configuration module its auto_map names. Prints one JSON line: {"cases": [{"ok": bool, "error": ""}]}.
Nothing is downloaded: the folders are local and the Hub endpoint is a closed loopback port.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.update(VLLM_TARGET_DEVICE="cpu", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ.setdefault("HF_MODULES_CACHE", str(Path(sys.argv[1]).parent / "hf-modules"))

from vllm.transformers_utils import config as vllm_config
from vllm.transformers_utils import repo_utils

# vLLM retries a failed parse after a pause (a Hub cache refresh may hide config.json); a local folder's
# answer does not change, so the pause only costs time.
vllm_config.with_retry = lambda func, log_msg, **kw: repo_utils.with_retry(func, log_msg, retry_delay=0)


def judge(case: dict) -> dict:
    try:
        vllm_config.get_config(case["folder"], bool(case["trust_remote_code"]))
    except Exception as error:  # any refusal is vLLM's verdict; its words go back for the report
        return {"ok": False, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
    return {"ok": True, "error": ""}


def main(request: Path) -> None:
    cases = json.loads(request.read_text())["cases"]
    print(json.dumps({"cases": [judge(case) for case in cases]}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
