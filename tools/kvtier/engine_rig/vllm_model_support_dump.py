"""What the pinned vLLM can load (tools/kvtier/upstream/vllm_model_support.json): the model types it and
transformers read a config.json for without running a model's own code, for kvtier.upstream.model_code, and
the --load-format and --tokenizer-mode names it has a loader and a tokenizer class for, for
kvtier.upstream.model_formats. Runs in the engine venv, by path:

    .venv-engine/bin/python tools/kvtier/engine_rig/vllm_model_support_dump.py OUT.json

What vLLM's HFConfigParser.parse (vllm/transformers_utils/config.py) and transformers'
AutoConfig.from_pretrained (transformers/models/auto/configuration_auto.py) consult: transformers'
CONFIG_MAPPING as it stands once vLLM is imported (the types that are "local code"), vLLM's own config
classes (_CONFIG_REGISTRY, registered before AutoConfig runs), the architectures vLLM maps to a model type
when config.json has none, and the speculative decoding configs it reads with their own classes. The load
formats are get_model_loader's (vllm/model_executor/model_loader/__init__.py), the tokenizer modes
TokenizerRegistry's (vllm/tokenizers/registry.py), each after vLLM's general plugins have registered theirs,
as at start-up. Written sorted, so a re-dump is byte-identical.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import vllm_args_probe as probe  # beside this script: its directory is on sys.path when run by path


def table() -> dict[str, Any]:
    from transformers import CONFIG_MAPPING
    from vllm.model_executor import model_loader
    from vllm.plugins import load_general_plugins
    from vllm.tokenizers.registry import TokenizerRegistry
    from vllm.transformers_utils import config as vllm_config

    load_general_plugins()

    return {
        "generated_by": "tools/kvtier/engine_rig/vllm_model_support_dump.py",
        "vllm": probe._vllm_version("vllm"),
        "transformers": probe._vllm_version("transformers"),
        "transformers_model_types": sorted(CONFIG_MAPPING.keys()),
        "vllm_config_registry": sorted(vllm_config._CONFIG_REGISTRY),
        "architecture_to_model_type": dict(sorted(vllm_config._ARCHITECTURE_TO_MODEL_TYPE.items())),
        "speculative_model_types": sorted(vllm_config._SPECULATIVE_DECODING_CONFIGS),
        "load_formats": sorted(model_loader._LOAD_FORMAT_TO_MODEL_LOADER),
        "tokenizer_modes": sorted(TokenizerRegistry.tokenizers),
    }


def main(out: Path) -> None:
    probe._setup()
    out.write_text(json.dumps(table(), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
