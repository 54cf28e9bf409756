"""Couplings across settings that no one key shows wrong: the LMCache release the engine image runs against
`cache.lmcacheVersion`, the helm-test prompt against the chunk size, and every rendered image reference
against the grammar the kubelet parses it with.

Each rule states its harm; where the values make the harm certain it is an error, where a fact outside them
decides (the tokenizer, what an image holds, the nodes' labels) it is a warning naming that fact. Where
the CSI node plugin may run against where the engines run: its node selector here, its tolerations in
curvine_rules (curvine-daemons-tolerate-engine-taints).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kvtier.images import reference
from kvtier.podscripts import kvcheck
from kvtier.validate.checks.policy import container_hit, each_container
from kvtier.validate.findings import POLICY
from kvtier.validate.inputs import merge
from kvtier.validate.rules import Hit, ManifestsContext, ValuesContext, rule
from kvtier.values import INSTANCE_LABEL, lookup, model_entries

# LMCache's own images (lmcache/vllm-openai) are tagged with LMCache's release (`v<release>`); other images
# may name it in the tag (`<vLLM release>-lmcache<release>`, as values/cpu.yaml's). Nightly and dated tags
# name none.
LMCACHE_IMAGE = re.compile(r"(?:^|/)lmcache/vllm-openai$")
# ASCII digits only: a tag has no others (kvtier.images.reference), though Python's \d matches any.
RELEASE_TAG = re.compile(r"^v?(\d+\.\d+\.\d+(?:\.post\d+)?)$", re.ASCII)
LMCACHE_IN_TAG = re.compile(r"lmcache[-_]?v?(\d+\.\d+\.\d+(?:\.post\d+)?)", re.IGNORECASE | re.ASCII)
IMAGE_FIELDS = ("registry", "repository", "tag", "digest")


def _default(*keys: str) -> Any:
    """A value of the umbrella chart's defaults (the values rules may see a file without them)."""
    return lookup(merge.umbrella().defaults, *keys)


def _lmcache_in(repository: str, tag: str) -> str | None:
    """The LMCache release an image's tag names, or None where it names none."""
    named = LMCACHE_IN_TAG.search(tag)
    if named:
        return named.group(1)
    own = RELEASE_TAG.match(tag) if LMCACHE_IMAGE.search(repository) else None
    return own.group(1) if own else None


@rule(
    "lmcache-version-matches-image",
    reason="cache.lmcacheVersion names each model's L2 namespace, so that chunks another LMCache release "
    "wrote are never read: declared unlike the image's release, the engines read and write chunks in a "
    "namespace labelled for another release, and an image upgrade keeps reading the old release's files",
    remedy="set cache.lmcacheVersion to the LMCache release in the engine image (engine.image, or "
    "hyperpod.worker.image on target hyperpod): the version in its tag, or `pip show lmcache` inside it",
)
def lmcache_version_matches_image(ctx: ValuesContext) -> Iterator[Hit]:
    """The chart puts cache.lmcacheVersion into every model's L2 namespace (templates/_cache.tpl
    kv-tiered-inference.l2Namespace) and into nothing else, so it is a promise about the image. A tag that
    names LMCache's release makes a mismatch certain (an error); an image that is not the chart's default and
    whose tag names no release leaves it to what the image holds (a warning naming that fact)."""
    values = ctx.values
    if str(lookup(values, "cache", "backend", default="lmcache")) != "lmcache":
        return  # vLLM's native offloading: cache.vllmVersion is its namespace (backend-vllm-version)
    hyperpod = lookup(values, "target", default="standalone") == "hyperpod"
    image_key = ("hyperpod", "worker", "image") if hyperpod else ("engine", "image")
    key_text = ".".join(image_key)
    image = lookup(values, *image_key)
    default = _default(*image_key) or {}
    image = image if isinstance(image, dict) else {}
    fields = {k: str(image.get(k, default.get(k)) or "") for k in IMAGE_FIELDS}
    declared = str(lookup(values, "cache", "lmcacheVersion", default=_default("cache", "lmcacheVersion")))
    named = _lmcache_in(fields["repository"], fields["tag"])
    if named is not None and named != declared.removeprefix("v"):
        pulled_by_digest = bool(fields["digest"])
        yield Hit(
            f"{key_text}.tag {fields['tag']!r} is LMCache {named}, but cache.lmcacheVersion is {declared}: "
            f"every model's L2 namespace is labelled LMCache {declared}; set cache.lmcacheVersion: "
            f'"{named}", or use an image of LMCache {declared}'
            + (
                f" (the image is pulled by {key_text}.digest: if that digest is LMCache {declared}, "
                "correct the tag instead)"
                if pulled_by_digest
                else ""
            ),
            (*image_key, "tag"),
            severity="warning" if pulled_by_digest else "error",
        )
    elif named is None and any(fields[k] != str(default.get(k) or "") for k in IMAGE_FIELDS):
        shown = fields["tag"] or fields["digest"]
        yield Hit(
            f"{key_text} {fields['repository']}:{shown} names no LMCache release in its tag, so "
            f"cache.lmcacheVersion {declared} is not checked against it: the LMCache release installed in "
            "the image decides (`pip show lmcache` in it); if it differs, each model's L2 namespace is "
            "labelled for another release",
            (*image_key, "tag" if fields["tag"] else "digest"),
            severity="warning",
        )


# What the cross-pod prompt holds besides its words (kvcheck.long_prompt): "Session <12 hex>. " before them,
# a BOS token the tokenizer may add, and nothing else (/v1/completions applies no chat template).
_NONCE_CHARS = len("Session ") + 12 + len(". ")
_SPECIAL_TOKENS = 2
CROSSPOD_REPLICAS = 2  # the chart renders the cross-pod test for a model with at least this many
# The most tokens one word of kvcheck's vocabulary, with the space before it, can be: one per byte, a
# byte-level tokenizer's worst case. The fewest is one: tokenizers split on spaces before merging.
_MOST_TOKENS_PER_WORD = max(len(w.encode()) for w in kvcheck.WORDS) + 1


def prompt_tokens(words: int) -> tuple[int, int]:
    """(fewest, most) tokens kvcheck's cross-pod prompt of `words` words can be, in any tokenizer."""
    body = max(words - 2, 1)  # long_prompt writes words - 2 vocabulary words after the nonce
    return body + 3, body * _MOST_TOKENS_PER_WORD + _NONCE_CHARS + _SPECIAL_TOKENS


@rule(
    "test-prompt-covers-a-chunk",
    reason="LMCache (save_unfull_chunk off, its default) and vLLM's native offloading store whole chunks of "
    "cache.chunkSize tokens only: a cross-pod test prompt shorter than one chunk leaves nothing in L2, so "
    "replica B reports no hit and helm test fails on a healthy install",
    remedy="raise tests.crosspodWords (or lower cache.chunkSize) until the prompt is several chunks: at "
    "least one word per token of cache.chunkSize, twice that for a tokenizer that keeps words whole",
)
def test_prompt_covers_a_chunk(ctx: ValuesContext) -> Iterator[Hit]:
    """The test exists with tests.enabled, target standalone, L2 and a model of two replicas or more
    (templates/tests/crosspod-test-pod.yaml). LMCache (the pinned one) stores len - len % chunk_size tokens
    (lmcache/v1/token_database.py _chunk_tokens; v1/config.py save_unfull_chunk default False, which the
    chart's config leaves); B's lookup finds only stored chunks (integration/vllm/vllm_v1_adapter.py
    get_num_new_matched_tokens), so B hits only when the prompt has at least chunk_size tokens. The
    prompt's tokens are bounded by prompt_tokens: below the bound a chunk is never reached (an error), between
    them the model's tokenizer decides (a warning)."""
    values = ctx.values
    words = lookup(values, "tests", "crosspodWords", default=_default("tests", "crosspodWords"))
    chunk = lookup(values, "cache", "chunkSize", default=_default("cache", "chunkSize"))
    if not isinstance(words, int) or not isinstance(chunk, int) or isinstance(words, bool):
        return  # the schema judges the types
    on = lookup(values, "tests", "enabled", default=True) and lookup(values, "cache", "l2", "enabled")
    if not on or lookup(values, "target", default="standalone") != "standalone":
        return
    tested = [m.get("name") for _, m in model_entries(values) if _replicas(m) >= CROSSPOD_REPLICAS]
    if not tested:
        return
    fewest, most = prompt_tokens(words)
    if most < chunk:
        yield Hit(
            f"tests.crosspodWords {words} makes a prompt of at most {most} tokens in any tokenizer, less "
            f"than one chunk (cache.chunkSize {chunk}): nothing is stored in L2, and the cross-pod test of "
            f"{', '.join(map(str, tested))} fails; raise tests.crosspodWords to at least {chunk}",
            ("tests", "crosspodWords"),
        )
    elif fewest < chunk:
        yield Hit(
            f"tests.crosspodWords {words} makes a prompt of {fewest} to {most} tokens, and one chunk is "
            f"cache.chunkSize {chunk}: with a tokenizer that keeps these words whole (one token each, as "
            "Llama 3's and Qwen's do) the prompt is shorter than a chunk and the cross-pod test finds no "
            f"hit; the model's tokenizer decides; raise tests.crosspodWords above {chunk}",
            ("tests", "crosspodWords"),
            severity="warning",
        )


def _replicas(model: dict[str, Any]) -> int:
    replicas = model.get("replicas", 1)
    return replicas if isinstance(replicas, int) else 0


def _suspect(text: str) -> str:
    """The part of a rendered reference a values key most likely holds whole (tag, digest, registry or
    repository): what provenance looks for in the values to point at the user's line."""
    name, at, digest = text.partition("@")
    if at:
        return digest
    slash, colon = name.rfind("/"), name.rfind(":")
    path, tag = (name[:colon], name[colon + 1 :]) if colon > slash else (name, None)
    if tag is not None and tag != tag.strip():
        return tag
    if tag is not None:
        try:
            reference.parse(f"x:{tag}")
        except ValueError:
            return tag
    first, _, rest = path.partition("/")
    if first != first.strip() or "//" in path:
        return first + ("/" if "//" in path else "")
    hosted = rest and (any(c in first for c in ".:") or first == "localhost")
    return rest if hosted else path


@rule(
    "image-reference-parses",
    scope="manifests",
    check_name=POLICY,
    reason="the kubelet parses every image with distribution's reference grammar before pulling: a "
    "reference it cannot parse (white space, an upper-case repository, an empty path component, a bad tag or "
    "digest) leaves the pod in InvalidImageName, never started",
    remedy="write registry without a trailing slash, repository in lower case, a tag of letters, digits, "
    "'_', '.', '-' (no spaces), or a digest as sha256:<64 hex>",
)
def image_reference_parses(ctx: ManifestsContext) -> Iterator[Hit]:
    """The parser is kvtier.images.reference (distribution/reference v0.6.0's grammar, as the kubelet's
    applyDefaultImageTag reads images); the chart joins registry, repository and tag without checking them
    (templates/_images.tpl, charts/curvine _helpers.tpl curvine.image)."""
    for m, field, c in each_container(ctx):
        text = str(c.get("image", ""))
        if not text:
            continue  # no image at all: the API server's and the chart's refusal (image-reference)
        try:
            reference.parse(text)
        except ValueError as error:
            yield container_hit(
                m,
                field,
                c,
                f"has image {text!r}, which the kubelet cannot parse ({error}): the pod stays in "
                f'InvalidImageName; Invalid value: "{_suspect(text)}"',
                ".image",
            )


def _engine_node_labels(model: dict[str, Any]) -> dict[str, str]:
    """The labels a model's engine pods require of their node (templates/_engine.tpl engineNodeSelector: the
    model's nodeSelector, and its instanceType as the instance-type label)."""
    selector = model.get("nodeSelector")
    labels = {str(k): str(v) for k, v in selector.items()} if isinstance(selector, dict) else {}
    if model.get("instanceType"):
        labels[INSTANCE_LABEL] = str(model["instanceType"])
    return labels


@rule(
    "curvine-csi-node-on-engine-nodes",
    reason="the kubelet mounts an engine's L2 claim through the Curvine CSI node plugin of the engine's own "
    "node: on a node curvine.csi.node.nodeSelector leaves out, the engine pod never starts "
    "(ContainerCreating, its CSI driver not registered there)",
    remedy="make curvine.csi.node.nodeSelector a subset of every model's node labels (nodeSelector and "
    "instanceType), or leave it empty so that the node plugin runs on every node",
)
def csi_node_on_engine_nodes(ctx: ValuesContext) -> Iterator[Hit]:
    """charts/curvine csi-node-daemonset.yaml selects nodes with curvine.csi.node.nodeSelector alone. A label
    the engines require with another value makes the miss certain (an error); a label they do not require
    leaves it to the nodes' labels (a warning naming the label)."""
    values = ctx.values
    if not lookup(values, "curvine", "enabled", default=False) or not lookup(
        values, "cache", "l2", "enabled"
    ):
        return
    if lookup(values, "target", default="standalone") != "standalone":
        return  # HyperPod's nodes are the operator's: hyperpod_pod_rules judge its pods
    if lookup(values, "curvine", "csi", "enabled", default=True) is False:
        return  # the node plugin comes from elsewhere: its placement is not in these values
    selector = lookup(values, "curvine", "csi", "node", "nodeSelector")
    if not isinstance(selector, dict):
        return
    at = ("curvine", "csi", "node", "nodeSelector")
    for i, model in model_entries(values):
        labels = _engine_node_labels(model)
        for key, value in ((str(k), str(v)) for k, v in selector.items()):
            if key not in labels:
                yield Hit(
                    f"curvine.csi.node.nodeSelector requires {key}={value}, which models[{i}]'s pods do not "
                    "require of their nodes: an engine scheduled on a node without that label cannot mount "
                    f"its L2 claim; whether every node the engines may use carries {key}={value} decides "
                    "(kubectl get nodes -L " + key + ")",
                    (*at, key),
                    severity="warning",
                )
            elif labels[key] != value:
                yield Hit(
                    f"curvine.csi.node.nodeSelector requires {key}={value}, but models[{i}]'s pods run "
                    f"only on nodes with {key}={labels[key]}: no Curvine node plugin runs there, so its "
                    "engines never mount the L2 claim",
                    (*at, key),
                )
