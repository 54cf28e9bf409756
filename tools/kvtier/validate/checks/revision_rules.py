"""A Hugging Face model's weights pinned to a commit (models[].source.huggingface.revision).

Without a revision each engine pod downloads the Hub repository's main branch when it starts. When main
moves, pods that restart (a rollout, an eviction, a node replaced) load the new weights while the others
keep the old ones: replicas behind one router answer differently. Worse for the tiers: the L2 namespace is
derived from the model's source, revision included (the chart's l2Namespace), so new weights behind an
unchanged revision read the KV that the old weights wrote. A branch or tag moves the same way.

Which environment is a production one: validate has no value that says so, and the bundle names its
production environments `values/prod-*.yaml`; so a values file named `prod-*.yaml` or `prod.yaml` (any of
the -f layers) is production here. There an unpinned model is an error; elsewhere a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import model_entries

COMMIT = re.compile(r"[0-9a-f]{40}")  # a full commit SHA, what the HyperPod operator's commitSHA takes too
PRODUCTION_FILE = re.compile(r"prod(-.*)?\.ya?ml")


def is_production(files: list[Path]) -> bool:
    """Whether any of an environment's values files is named as a production one (prod-*.yaml)."""
    return any(PRODUCTION_FILE.fullmatch(file.name) for file in files)


@rule(
    "model-revision-pinned",
    reason="a Hugging Face model without a commit revision follows the Hub's main: when main moves, pods "
    "that restart load new weights while the others keep the old, and the new weights read the KV the old "
    "ones wrote to L2 (its namespace changes with the revision, not with main); an error in a production "
    "environment, a values file named prod-*.yaml, a warning elsewhere",
    remedy="set models[].source.huggingface.revision to the 40-character commit SHA to serve (the `sha` of "
    "huggingface_hub's HfApi().model_info(<model>), or the snapshot folder name in a Hugging Face cache)",
)
def revision_pinned(ctx: ValuesContext) -> Iterator[Hit]:
    production = is_production([layer.path for layer in ctx.where().user])
    for i, model in model_entries(ctx.values):
        source = model.get("source")
        if not isinstance(source, dict) or "huggingface" not in source:
            continue
        hub = source.get("huggingface")
        revision = hub.get("revision") if isinstance(hub, dict) else None
        name = model.get("model")
        if revision is None or str(revision) == "":
            yield Hit(
                f"models[{i}] {name!r} is not pinned (no source.huggingface.revision): when the Hub's main "
                "moves, new weights reach the pods that restart, next to replicas on the old ones, and "
                "read the old weights' KV from L2; pin a 40-character commit SHA"
                + (" (required in a production environment, prod-*.yaml)" if production else ""),
                ("models", i, "source", "huggingface"),
                severity="error" if production else "warning",
            )
        elif production and not COMMIT.fullmatch(str(revision)):
            yield Hit(
                f"models[{i}] source.huggingface.revision {revision!r} is a branch or tag, not a commit "
                "SHA: a branch moves (and a tag can be moved), with the same effect as no pin; pin a "
                "40-character commit SHA",
                ("models", i, "source", "huggingface", "revision"),
                severity="warning",
            )
