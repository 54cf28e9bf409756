"""Tenant isolation on LMCache's tiers: a request's `cache_salt` made part of every LMCache key it reads or
writes, so tenant B never loads KV that tenant A wrote to L1 or L2.

vLLM keeps the salt in its own block hashes (L0, and the native backend's tiers, which key on those hashes),
but LMCache's in-process connector keys chunks on token ids alone. LMCache adds a request's
`lmcache.tag.<name>` configs to its chunk key (the key's equality and its L2 file name), and reads them from
the request's `kv_transfer_params`. This module's connector, LMCache's own vLLM connector otherwise, sets one
such tag from the request's salt before LMCache first looks the request up, on the engine's side: a client
cannot choose or drop it, and an unsalted request loses any tag of that name it sent. The tag is a SHA-256
digest of the salt, so the salt itself never appears in file names on the shared L2 (vLLM asks for salts
that third parties cannot read).

The engine pods import it from the chart's podscripts ConfigMap (PYTHONPATH), named by the kv-transfer-config:

    {"kv_connector": "SaltTaggedLMCacheConnectorV1", "kv_connector_module_path": "tenant_salt", ...}

The connector class is built on first access (PEP 562), so this file imports without vLLM or LMCache.
"""

from __future__ import annotations

import hashlib
from typing import Any

CONNECTOR = "SaltTaggedLMCacheConnectorV1"
MODULE = "tenant_salt"
TAG = "lmcache.tag.cache_salt"  # LMCache keeps `lmcache.tag.*` request configs in its chunk keys


def salt_tag(salt: str) -> str:
    """The tag value for `salt`: hex digits only, safe in LMCache's key strings and file names."""
    return hashlib.sha256(salt.encode("utf-8")).hexdigest()


def tagged_extra_args(extra_args: dict[str, Any] | None, salt: str | None) -> dict[str, Any] | None:
    """`extra_args` of a request's sampling params with the salt tag in its kv_transfer_params: set from
    `salt`, or removed when there is none. A new dict; the request's own is left as it came."""
    params = dict((extra_args or {}).get("kv_transfer_params") or {})
    had_tag = params.pop(TAG, None) is not None
    if salt:
        params[TAG] = salt_tag(salt)
    elif not had_tag:
        return extra_args  # nothing to set, nothing to remove
    return {**(extra_args or {}), "kv_transfer_params": params}


def tag_request(request: Any) -> None:
    """Put `request.cache_salt`'s tag where LMCache reads request configs (its sampling params)."""
    params = getattr(request, "sampling_params", None)
    if params is None:  # pooling requests carry no sampling params and no LMCache configs
        return
    params.extra_args = tagged_extra_args(params.extra_args, getattr(request, "cache_salt", None))


def _build_connector() -> type:
    from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector import LMCacheConnectorV1

    class SaltTaggedLMCacheConnectorV1(LMCacheConnectorV1):
        """LMCache's vLLM connector with the request's salt in every chunk key (see the module docstring).

        The scheduler asks get_num_new_matched_tokens first for a request it has not computed yet, and
        update_state_after_alloc for every request it allocates: tagging in both (idempotent) covers the
        lookup and, through the same sampling params object, the store and load LMCache plans after them.
        """

        def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Any:
            tag_request(request)
            return super().get_num_new_matched_tokens(request, num_computed_tokens)

        def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
            tag_request(request)
            super().update_state_after_alloc(request, blocks, num_external_tokens)

    return SaltTaggedLMCacheConnectorV1


def __getattr__(name: str) -> Any:
    if name == CONNECTOR:
        connector = _build_connector()
        globals()[name] = connector
        return connector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
