"""l2_warm.py's parts that need no engine: the prefixes file and its errors, the namespace listing (both
backends' layouts), waiting for a prefix's chunks, pins, and the script's exits when no replica answers.
The engine side (tokens, hits, the proof) runs against real vLLM in tests/engine/test_l2_warmup.py."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from kvtier.podscripts import l2_warm

NATIVE_CHUNK = "tiny_0123456789ab_r0/abc/de_g0/0123abcd.bin"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_a_prefixes_file_of_each_kind_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.json",
        {
            "prefixes": [
                {"name": "support", "text": "You help."},
                {"name": "chat.v2", "messages": [{"role": "system", "content": "Brief."}], "cacheSalt": "t"},
                {"name": "rag_1", "file": "/etc/kvtier-warmup/files/rag_1"},
            ]
        },
    )
    loaded = l2_warm.load_prefixes(str(path))
    assert [(p.name, p.describe()) for p in loaded] == [
        ("support", "text of 9 characters"),
        ("chat.v2", "1 chat messages"),
        ("rag_1", "file /etc/kvtier-warmup/files/rag_1"),
    ]
    assert loaded[1].cache_salt == "t"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not JSON"),
        ({"other": []}, 'expected {"prefixes": [...]}'),
        ({"prefixes": []}, "no prefix listed"),
        ({"prefixes": ["text"]}, "prefixes[0]: expected an object"),
        ({"prefixes": [{"name": "../x", "text": "a"}]}, "name '../x'"),
        (
            {"prefixes": [{"name": "a", "text": "a"}, {"name": "a", "text": "b"}]},
            "prefixes[1]: name 'a' is listed twice",
        ),
        (
            {"prefixes": [{"name": "a", "text": "a", "file": "/f"}]},
            "exactly one of text, messages, file; got ['text', 'file']",
        ),
        ({"prefixes": [{"name": "a"}]}, "got none"),
        ({"prefixes": [{"name": "a", "messages": [{"content": "x"}]}]}, "list of {role, content}"),
        ({"prefixes": [{"name": "a", "text": "x", "cacheSalt": ""}]}, "cacheSalt must be a non-empty string"),
        ({"prefixes": [{"name": "a", "text": "x", "tenant": "b"}]}, "unknown key 'tenant'"),
    ],
)
def test_a_bad_prefixes_file_names_the_file_the_entry_and_what_is_wrong(
    tmp_path: Path, content: object, words: str
) -> None:
    path = tmp_path / "p.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(l2_warm.WarmError) as raised:
        l2_warm.load_prefixes(str(path))
    assert str(path) in str(raised.value) and words in str(raised.value)


def test_a_prefix_from_a_missing_configmap_key_says_so(tmp_path: Path) -> None:
    prefix = l2_warm.Prefix("rag", file=str(tmp_path / "absent"))
    with pytest.raises(
        l2_warm.WarmError, match="does not exist: the ConfigMap or key it comes from is missing"
    ):
        l2_warm.prefix_text(prefix)
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(l2_warm.WarmError, match="is empty"):
        l2_warm.prefix_text(l2_warm.Prefix("rag", file=str(tmp_path / "empty")))


def test_the_namespace_listing_counts_chunks_of_both_backends_and_never_pins(tmp_path: Path) -> None:
    (tmp_path / "a.data").write_bytes(b"x")
    (tmp_path / "b.tmp").write_bytes(b"x")
    native = tmp_path / NATIVE_CHUNK
    native.parent.mkdir(parents=True)
    native.write_bytes(b"x")
    (native.parent / "0123abcd_5.tmp").write_bytes(b"x")
    (tmp_path / "tiny_0123456789ab").mkdir()
    (tmp_path / "tiny_0123456789ab" / "config.json").write_text("{}")
    l2_warm.write_pin(str(tmp_path), "support", {"a.data"}, [1, 2], None)
    chunks, temps = l2_warm.namespace_files(str(tmp_path))
    assert chunks == {"a.data", NATIVE_CHUNK} and len(temps) == 2
    assert l2_warm.namespace_files(str(tmp_path / "never-written")) == (set(), {})


def test_an_orphaned_temp_file_does_not_hold_the_wait_but_a_temp_written_to_does(tmp_path: Path) -> None:
    # A writer that died mid-store left its temp behind before this warm-up began: not in flight.
    orphan = tmp_path / "dead.tmp"
    orphan.write_bytes(b"half")
    os.utime(orphan, ns=(1_000_000_000, 1_000_000_000))
    before, temps_before = l2_warm.namespace_files(str(tmp_path))
    (tmp_path / "k1.data").write_bytes(b"kv")
    started = time.monotonic()
    new = l2_warm.wait_written(str(tmp_path), before, chunks=1, timeout_s=5, temps_before=temps_before)
    assert new == {"k1.data"} and time.monotonic() - started < 2
    # The same name written to since the listing is a store under way: the wait holds until its timeout.
    orphan.write_bytes(b"half and more")
    started = time.monotonic()
    l2_warm.wait_written(str(tmp_path), before, chunks=1, timeout_s=0.6, temps_before=temps_before)
    assert time.monotonic() - started >= 0.6


def test_waiting_for_a_prefix_ends_when_its_chunks_are_final(tmp_path: Path) -> None:
    (tmp_path / "old.data").write_bytes(b"x")
    before = l2_warm.namespace_files(str(tmp_path))[0]

    def store() -> None:  # LMCache's put after the response: a temp file, then the rename
        for name in ("k1", "k2"):
            time.sleep(0.3)
            (tmp_path / f"{name}.tmp").write_bytes(b"kv")
            time.sleep(0.3)
            os.replace(tmp_path / f"{name}.tmp", tmp_path / f"{name}.data")

    writer = threading.Thread(target=store)
    writer.start()
    new = l2_warm.wait_written(str(tmp_path), before, chunks=2, timeout_s=30)
    writer.join()
    assert new == {"k1.data", "k2.data"}
    started = time.monotonic()
    assert l2_warm.wait_written(str(tmp_path), before | new, chunks=1, timeout_s=0.5) == set()
    assert time.monotonic() - started >= 0.5


def test_pins_are_written_whole_and_stale_ones_removed(tmp_path: Path) -> None:
    l2_warm.write_pin(str(tmp_path), "support", {"b.data", "a.data"}, [5, 6, 7], "salt")
    l2_warm.write_pin(str(tmp_path), "retired", {"c.data"}, [1], None)
    pin = l2_warm.read_pin(str(tmp_path), "support")
    assert pin is not None and pin["files"] == ["a.data", "b.data"] and pin["tokens"] == 3
    assert pin["digest"] == l2_warm.digest([5, 6, 7], "salt") != l2_warm.digest([5, 6, 7], None)
    assert not [p for p in (tmp_path / ".kvtier-warm").iterdir() if p.suffix == ".part"]
    assert l2_warm.drop_stale_pins(str(tmp_path), {"support"}) == ["retired"]
    assert l2_warm.read_pin(str(tmp_path), "retired") is None
    (tmp_path / ".kvtier-warm" / "broken.json").write_text("{half")
    assert l2_warm.read_pin(str(tmp_path), "broken") is None


def test_pinned_files_prove_a_cached_prefix_only_while_all_are_there(tmp_path: Path) -> None:
    prefix = l2_warm.Prefix("support", text="x")
    for name in ("a.data", "b.data"):
        (tmp_path / name).write_bytes(b"x")
    l2_warm.write_pin(str(tmp_path), "support", {"a.data", "b.data"}, [1, 2], None)
    assert l2_warm._pinned_files_present(str(tmp_path), prefix, [1, 2])
    assert not l2_warm._pinned_files_present(str(tmp_path), prefix, [1, 3])  # another prefix now
    (tmp_path / "b.data").unlink()  # evicted or lost
    assert not l2_warm._pinned_files_present(str(tmp_path), prefix, [1, 2])


def test_resolve_lists_every_address_of_the_service() -> None:
    assert l2_warm.resolve("localhost", 8000) == ["http://127.0.0.1:8000"]
    assert l2_warm.resolve("no-such-service.invalid", 8000) == []


def test_no_replica_in_time_fails_or_warns_with_the_reason(tmp_path: Path) -> None:
    prefixes = write(tmp_path / "p.json", {"prefixes": [{"name": "a", "text": "x"}]})
    termination = tmp_path / "termination-log"
    termination.write_text("")
    closed = f"http://127.0.0.1:{closed_port()}"
    argv = ["--prefixes", str(prefixes), "--model", "m", "--replica", closed, "--chunk-tokens", "256"]
    argv += ["--timeout", "1", "--termination-log", str(termination)]
    assert l2_warm.main(argv) == l2_warm.FAILED
    assert termination.read_text().startswith("0 of the 2 replicas the warm-up needs were ready")
    assert l2_warm.main([*argv, "--on-failure", "warn"]) == l2_warm.OK
    assert termination.read_text().startswith("WARNING (cache.warmup.onFailure: warn): 0 of the 2")


@pytest.mark.parametrize(
    "extra",
    [
        [],  # neither --service nor --replica
        ["--service", "s", "--replica", "http://127.0.0.1:1"],
        ["--replica", "http://127.0.0.1:1", "--chunk-tokens", "0"],
    ],
)
def test_bad_arguments_exit_2_with_a_json_reason(tmp_path: Path, capsys, extra: list[str]) -> None:
    prefixes = write(tmp_path / "p.json", {"prefixes": [{"name": "a", "text": "x"}]})
    argv = ["--prefixes", str(prefixes), "--model", "m", "--chunk-tokens", "256", *extra]
    argv += ["--termination-log", str(tmp_path / "absent-log")]
    assert l2_warm.main(argv) == l2_warm.USAGE
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["check"] == "l2-warm" and not result["ok"] and result["summary"]


def test_prefixes_not_started_before_the_timeout_are_reported_not_attempted() -> None:
    """Past --timeout no prefix is started (nothing is sent: the replicas here are closed ports), so the
    Job reports instead of being killed by its activeDeadlineSeconds with no report."""
    closed = [f"http://127.0.0.1:{closed_port()}", f"http://127.0.0.1:{closed_port()}"]
    settings = l2_warm.Settings("m", 256, None, False, 1.0, 1.0, log=lambda _line: None)
    settings.deadline = time.monotonic() - 1
    outcomes, _ = l2_warm.warm(
        [l2_warm.Prefix("a", text="x"), l2_warm.Prefix("b", text="y")], closed, settings
    )
    assert [(o.prefix, o.problem) for o in outcomes] == [
        ("a", "not attempted: the warm-up's timeout passed before it"),
        ("b", "not attempted: the warm-up's timeout passed before it"),
    ]
    settings.deadline = None
    (tried,), _ = l2_warm.warm([l2_warm.Prefix("a", text="x")], closed, settings)
    assert "connection refused" in tried.problem, tried.problem


def test_a_pin_keeps_the_earlier_files_of_the_same_prefix_that_are_still_there(tmp_path: Path) -> None:
    """LMCache writes only the chunks it lacks: a partly cached prefix's new files join those its earlier
    pin named, minus any evicted since; another prefix under the same name starts afresh."""
    prefix = l2_warm.Prefix("support", text="x")
    for name in ("a.data", "b.data"):
        (tmp_path / name).write_bytes(b"x")
    l2_warm.write_pin(str(tmp_path), "support", {"a.data", "gone.data"}, [1, 2], None)
    assert l2_warm._pin(str(tmp_path), prefix, [1, 2], {"b.data"}) == 2
    assert l2_warm.read_pin(str(tmp_path), "support")["files"] == ["a.data", "b.data"]
    assert l2_warm._pin(str(tmp_path), prefix, [1, 2], set()) == 2  # a re-run writes nothing
    assert l2_warm._pin(str(tmp_path), prefix, [9], {"b.data"}) == 1  # the text changed
    assert l2_warm.read_pin(str(tmp_path), "support")["files"] == ["b.data"]
    assert l2_warm._pin(str(tmp_path / "empty"), prefix, [1, 2], set()) is None
