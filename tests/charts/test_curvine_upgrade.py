"""Format safety across install and upgrade.

How Curvine v0.4.1 behaves (curvine-master/src/master/journal/journal_system.rs
`require_existing_master_data`, crates/adapters/curvine-storage-local/src/vfs_dataset.rs,
crates/adapters/curvine-storage-local/src/version.rs):
- `format_master`/`format_worker` default to TRUE when omitted (ClusterConf::default), and true deletes
  the meta/journal RocksDB and every worker's storage directory at each start;
- with `format_master = false` a master accepts meta and journal dirs that are both valid RocksDB stores
  (reused) or both missing/clean-empty (created), and refuses anything else, e.g. a volume root that
  holds `lost+found`; with `format_worker = false` a worker creates a missing storage dir and keeps an
  existing one.
So the chart writes both flags as false in every render and points meta/journal at distinct
subdirectories of the volume: a fresh volume gets initialised, an existing one is never wiped, with no
install/upgrade-dependent switch that could be left on. This test renders an install and an upgrade.
"""

from __future__ import annotations

import posixpath
import tomllib
from typing import Any

import pytest
from render import find, helm_bin, render_docs

CHANGED = {"config.blockSize": "128MB", "image.tag": "v0.4.2"}


def render_release(upgrade: bool, need, **kwargs: Any) -> list[dict[str, Any]]:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    extra = ["--is-upgrade"] if upgrade else []
    return render_docs("curvine", extra=extra, **kwargs)


def toml_of(docs: list[dict[str, Any]]) -> str:
    [cm] = [d for d in find(docs, "ConfigMap") if "curvine-cluster.toml" in d["data"]]
    return cm["data"]["curvine-cluster.toml"]


@pytest.mark.parametrize("set_values", [{}, CHANGED], ids=["same-values", "changed-values"])
def test_upgrade_never_turns_format_on(set_values: dict[str, str], need) -> None:
    install = render_release(False, need)
    upgrade = render_release(True, need, set_values=set_values)
    for docs in (install, upgrade):
        config = tomllib.loads(toml_of(docs))
        assert config["format_master"] is False and config["format_worker"] is False
    if not set_values:
        # Nothing in the config depends on install vs upgrade.
        assert toml_of(install) == toml_of(upgrade)


def test_no_lifecycle_hooks_other_than_tests(need) -> None:
    # A pre-install/pre-upgrade "format" job is exactly what must not exist.
    for upgrade in (False, True):
        docs = render_release(upgrade, need, set_values={"pvc.enabled": True})
        hooks = {
            d["metadata"]["annotations"]["helm.sh/hook"]
            for d in docs
            if "helm.sh/hook" in d["metadata"].get("annotations", {})
        }
        assert hooks == {"test"}


@pytest.mark.parametrize("sub", ["curvine", "state/v1"])
def test_meta_and_journal_live_in_a_subdirectory_of_the_volume(sub: str, need) -> None:
    docs = render_release(True, need, set_values={"master.persistence.subDirectory": sub})
    config = tomllib.loads(toml_of(docs))
    [sts] = find(docs, "StatefulSet")
    mounts = {
        m["name"]: m["mountPath"] for m in sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    }
    root = mounts["data"]
    meta, journal = config["master"]["meta_dir"], config["journal"]["journal_dir"]
    for path in (meta, journal):
        assert posixpath.commonpath([root, path]) == root and path != root
        assert posixpath.dirname(path) == posixpath.join(root, sub)
    assert not meta.startswith(journal) and not journal.startswith(meta)
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["data"]
