"""A tiny random Llama model and its BPE tokenizer, generated locally (no downloads).

Runs in the engine venv (.venv-engine: torch, transformers, tokenizers), by path:

    .venv-engine/bin/python tools/kvtier/engine_rig/tinymodel.py OUT_DIR

The weights are random (seeded), so the text is noise; what matters for the rig is that vLLM loads
it like any Hugging Face Llama, that prefill cost grows with the prompt (so cache hits show in TTFT),
and that the rig's prompts (kvcheck.WORDS) tokenize to about one token per word.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Big enough that a 2,000-token prefill dominates the fixed per-request cost on a CPU, small
# enough to generate in seconds. head_dim 64, 2 KV heads: grouped-query attention like real models.
CONFIG: dict[str, Any] = {
    "vocab_size": 2048,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
SEED = 0
SPECIAL = ["<unk>", "<s>", "</s>"]
# ChatML, as Qwen2's tokenizer has it: chat prefixes (the L2 warm-up's `messages`) render as they would there.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def corpus() -> list[str]:
    """Training text for the tokenizer: the rig's vocabulary in sentences, plus digits and hex nonces."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "podscripts"))
    import kvcheck  # the prompts the checks send

    words = list(kvcheck.WORDS)
    lines = [" ".join(words[i:] + words[:i]) for i in range(len(words))]
    lines += ["Session 0123456789abcdef.", "The shared cache tier serves a warm replica first."]
    return lines * 4


def build_tokenizer(out: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=CONFIG["vocab_size"],
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # any text encodes, no <unk>
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.model_max_length = CONFIG["max_position_embeddings"]
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return int(tokenizer.get_vocab_size())


def build_model(out: Path, vocab_size: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(**dict(CONFIG, vocab_size=vocab_size), bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(out), safe_serialization=True)


def generate(out: Path) -> Path:
    """Write model + tokenizer into `out` (idempotent: a complete directory is kept)."""
    marker = out / "kvtier-tinymodel.json"
    identity = {**CONFIG, "chat_template": CHAT_TEMPLATE}
    if marker.exists() and json.loads(marker.read_text()) == identity:
        return out
    out.mkdir(parents=True, exist_ok=True)
    build_model(out, build_tokenizer(out))
    marker.write_text(json.dumps(identity))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tinymodel.py OUT_DIR")
    print(generate(Path(sys.argv[1])))
