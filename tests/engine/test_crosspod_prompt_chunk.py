"""What the rule test-prompt-covers-a-chunk (validate's coupling_rules) stands on, measured on the real
libraries instead of assumed:

- LMCache, configured from the chart's rendered file for values/cpu.yaml, stores nothing of a prompt shorter
  than one chunk, so another pod finds no hit; one chunk of tokens is found whole.
- The token bounds the rule puts on kvcheck's cross-pod prompt hold for real tokenizers at both ends: a
  byte-level BPE with no merges (each byte a token, the most any tokenizer makes of these words) and one
  trained on the prompt's vocabulary (each word one token, the fewest).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.engine import invariants
from kvtier.engine_rig import rendered, tiers
from kvtier.engine_rig.rig import engine_python
from kvtier.podscripts import kvcheck
from kvtier.validate.checks import coupling_rules

TINY = {"layers": 2, "kv_heads": 2, "head_size": 64}
CHUNK = 256  # values/cpu.yaml's cache.chunkSize, asserted below from the render


def test_a_prompt_shorter_than_one_chunk_leaves_nothing_for_another_pod(work: Path) -> None:
    engine = rendered.render_engine([tiers.CPU_VALUES], {"cache": {"l2": {"integrity": False}}}, work / "a")
    pod = invariants.pod_case(engine, work / "l2", work / "a", TINY)
    assert f"chunk_size: {CHUNK}" in Path(pod.case["config"]).read_text()
    short = {**pod.case, "tokens": invariants.prompt_tokens(CHUNK - 1, seed=1), "kv_seed": 1}
    whole = {**pod.case, "tokens": invariants.prompt_tokens(CHUNK, seed=2), "kv_seed": 2}
    stored = invariants.run_cases(
        [{**short, "action": "store"}, {**whole, "action": "store"}], pod.seed, work
    )
    assert [s["stored_files"] for s in stored] == [0, 1], stored
    found = invariants.run_cases(
        [{**short, "action": "lookup"}, {**whole, "action": "lookup"}], pod.seed, work
    )
    assert [f["hit_tokens"] for f in found] == [0, CHUNK], found


# Runs in the engine venv (tokenizers): token counts of kvcheck's prompt for the two extreme tokenizers.
_COUNT = """
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
words, prompts = json.loads(sys.stdin.read())
def byte_level(vocab_size):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=alphabet, show_progress=False)
    t.train_from_iterator([" ".join(words)] * 50 if vocab_size > len(alphabet) else [""], trainer)
    return t
bytes_only, whole_words = byte_level(256), byte_level(4096)
print(json.dumps([[len(t.encode(p).ids) for p in prompts] for t in (bytes_only, whole_words)]))
"""


def test_the_rules_token_bounds_hold_for_the_extreme_tokenizers(work: Path) -> None:
    counts = [3, 20, 300, 1500]
    prompts = [kvcheck.long_prompt(n) for n in counts]
    out = subprocess.run(
        [str(engine_python()), "-c", _COUNT],
        input=json.dumps([list(kvcheck.WORDS), prompts]),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    most_tokens, fewest_tokens = json.loads(out.stdout)
    for n, most, fewest in zip(counts, most_tokens, fewest_tokens, strict=True):
        low, high = coupling_rules.prompt_tokens(n)
        assert fewest < most, (n, fewest, most)  # the two tokenizers really are apart
        assert low <= fewest and most <= high, (n, low, fewest, most, high)
