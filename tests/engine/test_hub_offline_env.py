"""hub-offline-with-hub-source reads the offline switch as huggingface_hub does: every combination of
HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE values (unset, empty, true and false spellings, junk) is given to
huggingface_hub's own constants module in the engine venv (the library vLLM downloads with), and the rule's
reader must agree with it on each."""

from __future__ import annotations

import itertools
import json
import subprocess

import pytest

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError
from kvtier.validate.checks import model_source_rules

VALUES = [None, "", "1", "0", "true", "True", "TRUE", "yes", "On", "off", "no", "false", "2", " 1", "1 "]
NAMES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
CASES = [dict(zip(NAMES, pair, strict=True)) for pair in itertools.product(VALUES, repeat=2)]

# Runs in the engine venv: one line of JSON, huggingface_hub's verdict for each case.
JUDGE = """
import importlib, json, os, sys
import huggingface_hub.constants as constants
verdicts = []
for case in json.loads(sys.argv[1]):
    for name, value in case.items():
        os.environ.pop(name, None)
        if value is not None:
            os.environ[name] = value
    verdicts.append(importlib.reload(constants).HF_HUB_OFFLINE)
print(json.dumps(verdicts))
"""


def test_the_offline_switch_is_read_as_huggingface_hub_reads_it(need) -> None:
    try:
        python = engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine venv unavailable: {error}")
        pytest.fail("unreachable")
    run = subprocess.run(
        [str(python), "-c", JUDGE, json.dumps(CASES)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    truth = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(truth) == len(CASES) and any(truth) and not all(truth)
    for case, offline in zip(CASES, truth, strict=True):
        env = {name: (i, value) for i, (name, value) in enumerate(case.items()) if value is not None}
        assert (model_source_rules.hub_offline(env) is not None) == offline, case
