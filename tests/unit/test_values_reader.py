"""kvtier.values.lookup: the one nested reader of values, on trees as YAML loads them."""

from __future__ import annotations

import yaml

from kvtier.values import lookup

TREE = yaml.safe_load(
    """
cache:
  hashSeed: "0"
  l1: {size: null}
models:
  - name: a
    extraArgs: ["--max-model-len", "4096"]
  - just a string
"""
)


def test_mapping_keys_and_list_indices_reach_the_leaf() -> None:
    assert lookup(TREE, "cache", "hashSeed") == "0"
    assert lookup(TREE, "models", 0, "extraArgs", 1) == "4096"


def test_a_null_is_a_value_and_a_missing_path_is_the_default() -> None:
    missing = object()
    assert lookup(TREE, "cache", "l1", "size", default=missing) is None
    assert lookup(TREE, "cache", "l2", "size", default=missing) is missing
    assert lookup(TREE, "models", 2, default=missing) is missing
    assert lookup(TREE, "models", -1, default=missing) is missing  # YAML has no negative index
    assert lookup(TREE, "models", "0", default=missing) is missing  # a string is not an index
    assert lookup(TREE, "models", 1, "name", default=missing) is missing  # through a scalar
    assert lookup(TREE) is TREE
