"""Cross-field rules over the effective values: cache invariants and models (DESIGN.md sections 4, 10).

The L2 storage and Curvine rules are in storage_rules.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kvtier.errors import UserError
from kvtier.plan.inputs import MIN_L1_GIB, l1_budget_gib
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import extra_args, lookup, model_entries

# Settings that must be identical in every engine pod for cross-pod hits (DESIGN.md section 4); the
# bundle sets them once from `cache`, so a per-model override would split the pods.
INVARIANT_ENV = (
    "PYTHONHASHSEED",
    "LMCACHE_CHUNK_SIZE",
    "LMCACHE_REMOTE_URL",
    "LMCACHE_REMOTE_SERDE",
    "LMCACHE_PRE_CACHING_HASH_ALGORITHM",
    "LMCACHE_CONFIG_FILE",
    "LMCACHE_LOCAL_DISK",
)
# What models serving the same weights must agree on: they read and write the same L2 keys.
SAME_MODEL_KEYS = ("dtype", "gpusPerReplica", "image")
SAME_MODEL_ARGS = (
    "--kv-cache-dtype",
    "--pipeline-parallel-size",
    "--tensor-parallel-size",
    "--max-model-len",
)


def _env_names(env: Any) -> Iterator[tuple[int | str, str]]:
    if isinstance(env, list):
        yield from ((i, str(e.get("name"))) for i, e in enumerate(env) if isinstance(e, dict))
    elif isinstance(env, dict):
        yield from ((k, str(k)) for k in env)


@rule(
    "crosspod-hash-seed",
    reason="an unset or random PYTHONHASHSEED gives every pod different prefix hashes: no cross-pod hit",
    remedy='set cache.hashSeed to a fixed decimal string such as "0"',
)
def hash_seed(ctx: ValuesContext) -> Iterator[Hit]:
    seed = lookup(ctx.values, "cache", "hashSeed")
    if seed is None or str(seed).strip() in ("", "random"):
        yield Hit(
            f"cache.hashSeed is {seed!r}: engine pods would hash prefixes differently", ("cache", "hashSeed")
        )
    elif not re.fullmatch(r"[0-9]+", str(seed)) or int(str(seed)) > 4294967295:
        yield Hit(f"cache.hashSeed {seed!r} is not a PYTHONHASHSEED (0..4294967295)", ("cache", "hashSeed"))


@rule(
    "crosspod-no-override",
    reason="a model that overrides a cache invariant (hash seed, chunk size, L2 URL/serde) stops sharing KV",
    remedy="set the invariant once under cache: and remove the per-model env var (engine-args-reserved "
    "does the same for vLLM flags)",
)
def no_override(ctx: ValuesContext) -> Iterator[Hit]:
    for key, name in _env_names(lookup(ctx.values, "engine", "extraEnv")):
        if name in INVARIANT_ENV:
            yield Hit(
                f"engine.extraEnv sets {name}, which the chart derives from cache:",
                ("engine", "extraEnv", key),
            )
    for i, model in model_entries(ctx.values):
        for key, name in _env_names(model.get("env")):
            if name in INVARIANT_ENV:
                yield Hit(
                    f"models[{i}] sets {name}, which the chart derives from cache:", ("models", i, "env", key)
                )


@rule(
    "crosspod-same-model",
    reason="entries serving the same model share L2 keys: dtype, TP/PP size, KV dtype and image must match",
    remedy="give every entry with this `model` the same dtype, gpusPerReplica, image and parallelism args",
)
def same_model(ctx: ValuesContext) -> Iterator[Hit]:
    first: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, model in model_entries(ctx.values):
        name = str(model.get("model", ""))
        if name not in first:
            first[name] = (i, model)
            continue
        j, other = first[name]
        for key in SAME_MODEL_KEYS:
            if model.get(key) != other.get(key):
                yield Hit(
                    f"models[{i}].{key} {model.get(key)!r} differs from models[{j}] "
                    f"({other.get(key)!r}), which serves the same model {name!r}",
                    ("models", i, key),
                )
        mine, theirs = extra_args(model), extra_args(other)
        for flag in SAME_MODEL_ARGS:
            a, b = mine.value(flag), theirs.value(flag)
            if a != b:
                setting = mine.last(flag)
                yield Hit(
                    f"models[{i}] {flag} {a!r} differs from models[{j}] ({b!r}) for {name!r}",
                    ("models", i, "extraArgs", *([setting.index] if setting else [])),
                )


@rule(
    "l1-fits-memory",
    reason="L1 is pinned host memory inside the pod: past the memory limit the pod is OOM-killed",
    remedy="keep cache.l1.size <= limits.memory - engine.shmSize - cache.l1.headroom, or use size: auto",
)
def l1_fits(ctx: ValuesContext) -> Iterator[Hit]:
    l1 = lookup(ctx.values, "cache", "l1")
    if not isinstance(l1, dict) or not l1.get("enabled", True):
        return
    size = l1.get("size")
    for i, model in model_entries(ctx.values):
        limit = lookup(model, "resources", "limits", "memory")
        if limit is None:
            yield Hit(
                f"models[{i}] has no resources.limits.memory, so L1 ({size}) cannot be sized or checked",
                ("models", i, "resources"),
            )
            continue
        try:
            budget = l1_budget_gib(ctx.values, limit)
        except UserError:  # a malformed quantity: the schema reports it
            continue
        if size != "auto" and isinstance(size, int | float) and size > budget:
            yield Hit(
                f"cache.l1.size {size} GiB does not fit models[{i}]'s memory limit {limit} "
                f"(at most {budget:.1f} GiB after /dev/shm and headroom)",
                ("cache", "l1", "size"),
            )
        elif size == "auto" and budget < MIN_L1_GIB:
            yield Hit(
                f"models[{i}] limit {limit} leaves {budget:.1f} GiB for L1 (auto needs {MIN_L1_GIB:g})",
                ("models", i, "resources", "limits", "memory"),
            )


@rule(
    "tp-equals-gpus",
    reason="vLLM shards a replica over --tensor-parallel-size GPUs: more GPUs idle, fewer fail to start",
    remedy="make gpusPerReplica, --tensor-parallel-size and resources nvidia.com/gpu the same number",
)
def tp_equals_gpus(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        gpus = model.get("gpusPerReplica", 1)
        tp = extra_args(model).last("--tensor-parallel-size")
        if tp is not None and tp.value is not None and tp.value != str(gpus):
            yield Hit(
                f"models[{i}] --tensor-parallel-size {tp.value} != gpusPerReplica {gpus}",
                ("models", i, "extraArgs", tp.index),
            )
        for kind in ("limits", "requests"):
            declared = lookup(model, "resources", kind, "nvidia.com/gpu")
            if declared is not None and str(declared) != str(gpus):
                yield Hit(
                    f"models[{i}] resources.{kind}[nvidia.com/gpu] {declared} != gpusPerReplica {gpus}",
                    ("models", i, "resources", kind, "nvidia.com/gpu"),
                )


# keys whose value is the secret itself (not keys that name a Secret object, like existingSecret)
_SECRET_KEY = re.compile(r"(token|password|passwd|apikey|api_key|accesskey|secretkey|clientsecret)$", re.I)


@rule(
    "secrets-not-inline",
    reason="a secret written into a values file ends up in Git, Helm's release history and every render",
    remedy="keep the value in a Kubernetes Secret and reference it (e.g. source.huggingface.tokenSecret)",
)
def secrets_not_inline(ctx: ValuesContext) -> Iterator[Hit]:
    def walk(tree: Any, at: tuple[str | int, ...]) -> Iterator[Hit]:
        if isinstance(tree, dict):
            for key, value in tree.items():
                if isinstance(value, str) and value and _SECRET_KEY.search(str(key)):
                    yield Hit(f"{key} holds a literal secret value", (*at, key))
                else:
                    yield from walk(value, (*at, key))
        elif isinstance(tree, list):  # env entries ({name, value}): secret_rules.secret_env_not_inline
            for j, item in enumerate(tree):
                yield from walk(item, (*at, j))

    yield from walk(ctx.values, ())


@rule(
    "tests-kept-pods-hold-the-claim",
    reason="a kept, completed helm test pod that mounts the chart's own L2 claim keeps that claim from being "
    "deleted (PVC protection): helm uninstall --wait hangs on it",
    remedy="leave tests.deleteSucceededPods on, or give the L2 as cache.l2.claim.existingClaim (a claim the "
    "chart never deletes)",
)
def kept_test_pods(ctx: ValuesContext) -> Iterator[Hit]:
    if lookup(ctx.values, "tests", "deleteSucceededPods", default=True) is not False:
        return
    if not lookup(ctx.values, "cache", "l2", "enabled", default=True):
        return
    if not lookup(ctx.values, "cache", "l2", "claim", "existingClaim", default=""):
        yield Hit(
            "tests.deleteSucceededPods is false while the chart creates the L2 claim itself",
            ("tests", "deleteSucceededPods"),
        )


@rule(
    "model-names-unique",
    reason="each model's name names its Deployment, Service, router and LMCache ConfigMap: two entries with "
    "one name render one set of objects, and the second model silently replaces the first",
    remedy="give every entry of models[] its own name",
)
def model_names_unique(ctx: ValuesContext) -> Iterator[Hit]:
    first: dict[str, int] = {}
    for i, model in model_entries(ctx.values):
        name = model.get("name")
        if not isinstance(name, str):
            continue
        if name in first:
            yield Hit(f"models[{i}].name {name!r} is also models[{first[name]}].name", ("models", i, "name"))
        else:
            first[name] = i


# The cross-pod test prompt (kvcheck.long_prompt): a nonce sentence, then tests.crosspodWords words from a
# vocabulary of common English words, each one token or more (a word never shares a token with the next:
# tokenizers split on spaces first), and about two in the worst subword tokenizers.
PROMPT_EXTRA_TOKENS = 16  # "Session <12 hex>." and the 4 tokens the check generates, generously
LIKELY_TOKENS_PER_WORD = 2


@rule(
    "test-prompt-fits-context",
    reason="helm test sends a prompt of tests.crosspodWords words: longer than a model's max-model-len, "
    "vLLM refuses it and the cross-pod check fails on a healthy install",
    remedy="keep tests.crosspodWords well under each model's maxModelLen (about half: one or two tokens a "
    "word), above the chunk size so that L2 is exercised",
)
def test_prompt_fits(ctx: ValuesContext) -> Iterator[Hit]:
    words = lookup(ctx.values, "tests", "crosspodWords")
    if not lookup(ctx.values, "tests", "enabled", default=True) or not isinstance(words, int):
        return
    for i, model in model_entries(ctx.values):
        context = model.get("maxModelLen")
        if not isinstance(context, int):
            continue
        if words + PROMPT_EXTRA_TOKENS > context:
            yield Hit(
                f"tests.crosspodWords {words} is at least {words + PROMPT_EXTRA_TOKENS} tokens, above "
                f"models[{i}].maxModelLen {context}",
                ("tests", "crosspodWords"),
            )
        elif words * LIKELY_TOKENS_PER_WORD + PROMPT_EXTRA_TOKENS > context:
            yield Hit(
                f"tests.crosspodWords {words} is likely about {words * LIKELY_TOKENS_PER_WORD} tokens with "
                f"a subword tokenizer, near or above models[{i}].maxModelLen {context}",
                ("tests", "crosspodWords"),
                severity="warning",
            )
