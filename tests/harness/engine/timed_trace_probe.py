"""vLLM's own timed_trace dataset reading a trace: what `vllm bench serve` would send. Runs in the engine
venv:

    .venv-engine/bin/python tests/harness/engine/timed_trace_probe.py TRACE.jsonl TOKENIZER_DIR BLOCK_TOKENS

Prints one JSON object: {"prompts": [token ids of each sample], "timestamps": [seconds]}.
"""

from __future__ import annotations

import json
import sys

from transformers import AutoTokenizer
from vllm.benchmarks.datasets.datasets import TimedTrace


def main() -> None:
    trace, tokenizer_dir, block = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    dataset = TimedTrace(
        dataset_path=trace, random_seed=0, timed_trace_chunk_hash_size=block, timed_trace_sec_multiplier=1,
        timed_trace_label_timestamp="timestamp", timed_trace_label_input_length="input_length",
        timed_trace_label_output_length="output_length", timed_trace_label_hash_ids="hash_ids",
    )  # fmt: skip
    with open(trace) as lines:
        count = sum(1 for _ in lines)
    samples = dataset.sample(tokenizer, count)
    print(json.dumps({"prompts": [s.prompt for s in samples], "timestamps": [s.timestamp for s in samples]}))


if __name__ == "__main__":
    main()
