"""Checks of a rendered curvine-cluster.toml against what Curvine v0.4.1 actually reads.

Curvine deserialises its config with serde `#[serde(default)]` and no `deny_unknown_fields`, so a
misspelt key is silently ignored and the default applies. The known key set below is the one place the
bundle records which keys exist: struct field names plus serde aliases, minus `#[serde(skip)]` fields,
read from CurvineIO/curvine v0.4.1 `crates/common/curvine-config/src/*_conf.rs` (ClusterConf,
MasterConf, JournalConf, WorkerConf, ClientConf, FuseConf, JobConf, TransferConf, CliConf, DBConf,
RaftPeer), `crates/core/runtime/src/common/logger.rs` (LogConf), `crates/core/net/src/net/inet_addr.rs`
(InetAddr), `crates/core/curvine-io/src/spdk_conf.rs` (SpdkConf), `crates/core/curvine-fault/src/model.rs`.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from typing import Any

from kvtier.errors import UserError

CURVINE_VERSION = "0.4.1"

_LOG = (
    "level log_dir file_name max_log_files max_file_size_mb time_rotation display_thread"
    " display_position targets"
)
_DB = (
    "base_dir data_dir checkpoint_dir family_list disable_wal compression_type db_write_buffer_size"
    " block_size block_cache_size disable_block_cache write_buffer_size max_write_buffer_number"
    " use_bloom_filter max_background_jobs max_subcompactions bloom_filter_bits_per_key"
    " block_based_bloom_filter level0_file_num_compaction_trigger level0_slowdown_writes_trigger"
    " level0_stop_writes_trigger max_bytes_for_level_base target_file_size_base max_total_wal_size"
    " bytes_per_sync wal_bytes_per_sync compaction_readahead_size use_direct_reads"
    " use_direct_io_for_flush_and_compaction cache_index_and_filter_blocks"
    " pin_l0_filter_and_index_blocks_in_cache enable_statistics"
)

# Table path -> keys it may hold. "a.b" is a nested table, "a.b[]" each table of an array of tables.
_KEYS_TEXT: dict[str, str] = {
    "": (
        "format_master format_worker testing cluster_id net_interface master journal worker"
        " fault_injection log client fuse job transfer cli"
    ),
    "log": _LOG,
    "master": (
        "hostname rpc_port web_port io_threads worker_threads actor_threads io_timeout io_close_idle"
        " meta_request_concurrent meta_dir min_block_size max_block_size min_replication"
        " max_replication max_path_len max_path_depth retry_cache_enable retry_cache_size"
        " retry_cache_ttl block_report_limit worker_policy executor_threads executor_channel_size"
        " heartbeat_interval worker_check_interval worker_blacklist_interval worker_lost_interval"
        " audit_logging_enabled audit_log block_replication_enabled"
        " block_replication_concurrency_limit block_replication_retry_interval log"
        " ttl_checker_retry_attempts ttl_checker_interval ttl_bucket_interval ttl_max_retry_duration"
        " ttl_retry_interval enable_quota_eviction quota_eviction_mode quota_eviction_policy"
        " quota_eviction_high_rate quota_eviction_low_rate quota_eviction_scan_page"
        " quota_eviction_dry_run quota_eviction_capacity lock_expire_time buffer_size conn_limit"
        " global_limit rocksdb"
    ),
    "master.log": _LOG,
    "master.audit_log": _LOG,
    "master.rocksdb": _DB,
    "journal": (
        "enable group_name hostname rpc_port io_threads worker_threads message_size journal_addrs"
        " journal_dir writer_channel_size writer_flush_batch_size writer_flush_batch_ms"
        " snapshot_interval snapshot_entries snapshot_read_chunk_size conn_retry_max_duration_ms"
        " conn_retry_min_sleep_ms conn_retry_max_sleep_ms rpc_close_idle rpc_retry_max_duration_ms"
        " rpc_retry_min_sleep_ms rpc_retry_max_sleep_ms conn_timeout_ms io_timeout_ms conn_size"
        " raft_tick_interval_ms raft_election_tick raft_heartbeat_tick raft_min_election_ticks"
        " raft_max_election_ticks raft_check_quorum raft_max_size_per_msg raft_max_inflight_msgs"
        " raft_max_committed_size_per_ready raft_batch_size raft_retry_cache_size raft_retry_cache_ttl"
        " retain_checkpoint_num ignore_reply_error max_retry_num skip_failed_ufs_replay_after_retry"
        " scan_batch_size retry_interval_secs ufs_copy_timeout rocksdb"
    ),
    "journal.journal_addrs[]": "id hostname port",
    "journal.rocksdb": _DB,
    "worker": (
        "hostname weight rpc_port web_port dir_reserved data_dir io_slow_threshold io_threads"
        " worker_threads io_timeout io_close_idle scheduler_threads log executor_threads"
        " executor_channel_size enable_splice enable_send_file pipe_buf_size pipe_pool_init_cap"
        " pipe_pool_max_cap pipe_pool_idle_time block_replication_concurrency_limit"
        " block_replication_chunk_size spdk_disk"
    ),
    "worker.log": _LOG,
    "worker.spdk_disk": (
        "enabled app_name hugepage_str hugepage reactor_mask iova_mode targets io_queue_depth"
        " io_queue_requests io_timeout_str io_timeout io_retry_count keep_alive_timeout_str"
        " keep_alive_timeout qpair_acquire_timeout_str qpair_acquire_timeout poll_interval_ms"
        " poll_interval spin_iter dma_buffer_size_str dma_buffer_size"
    ),
    "client": (
        "master_addrs hostname io_threads worker_threads replicas block_size_str block_size"
        " write_chunk_size_str write_chunk_size write_chunk_num read_chunk_size_str read_chunk_size"
        " read_chunk_num read_parallel read_slice_size_str read_slice_size max_cache_block_handles"
        " short_circuit storage_type_str storage_type ttl_ms_str ttl_ms ttl_action_str ttl_action"
        " auto_cache_enabled auto_cache_ttl default_cache_ttl conn_retry_max_duration_ms"
        " conn_retry_min_sleep_ms conn_retry_max_sleep_ms rpc_retry_max_duration_ms"
        " rpc_retry_min_sleep_ms rpc_retry_max_sleep_ms rpc_close_idle conn_timeout_ms rpc_timeout_ms"
        " data_timeout_ms pipeline_timeout_ms master_conn_pool_size enable_read_ahead"
        " read_ahead_len_str read_ahead_len drop_cache_len_str drop_cache_len failed_worker_ttl_ms"
        " failed_worker_ttl enable_unified_fs enable_rust_read_ufs audit_logging_enabled"
        " mount_update_ttl_ms mount_update_ttl umask metric_report_enable clean_task_interval_ms"
        " clean_task_interval close_timeout_secs metadata_operation_buckets sync_check_interval_min_ms"
        " sync_check_interval_min sync_check_interval_max_ms sync_check_interval_max"
        " max_sync_wait_timeout_ms max_sync_wait_timeout sync_check_log_tick enable_block_conn_pool"
        " block_conn_idle_size block_conn_idle_time_ms block_conn_idle_time small_file_size_str"
        " small_file_size enable_smart_prefetch large_file_size_str large_file_size max_read_parallel"
        " sequential_read_threshold"
    ),
    "client.master_addrs[]": "hostname port",
    "fuse": (
        "debug audit_logging_enabled metrics_enabled io_threads worker_threads mnt_path fs_path"
        " mnt_number tasks_per_mnt mnt_per_task clone_fd fuse_channel_size stream_channel_size"
        " fuse_opts readonly umask uid gid web_port read_dir_fill_ino entry_timeout_ms"
        " negative_timeout_ms attr_timeout_ms remember max_background congestion_threshold"
        " enable_meta_cache meta_cache_timeout node_cache_timeout direct_io open_direct_on_stale"
        " write_back_cache cache_readdir non_seekable check_permission state_dir max_readahead_kb"
        " list_limit enable_splice path_lock_stripes log"
    ),
    "fuse.log": _LOG,
    "job": (
        "job_life_ttl_str job_life_ttl job_cleanup_ttl_str job_cleanup_ttl terminal_retention_str"
        " terminal_retention job_max_files master_max_concurrent_load_jobs"
        " master_max_background_load_jobs master_max_pending_load_job_submits"
        " master_load_job_runtime_threads master_load_job_blocking_threads"
        " master_failed_load_job_retry_interval_str master_failed_load_job_retry_interval"
        " task_timeout_str task_timeout task_report_interval_str task_report_interval"
        " worker_max_concurrent_tasks"
    ),
    "transfer": (
        "enabled store_type store_url hostname rpc_port web_port instance_id endpoints sqlite_path"
        " mysql_url max_running_transfers lease_timeout_str lease_timeout terminal_retention_str"
        " terminal_retention"
    ),
    "cli": "log",
    "cli.log": _LOG,
    "fault_injection": "enabled auth_token_env",
}
KNOWN_KEYS: dict[str, frozenset[str]] = {path: frozenset(text.split()) for path, text in _KEYS_TEXT.items()}

# StorageType::try_from in curvine-model storage_info.rs (case-insensitive). Any other word silently
# becomes DISK, which is why the bundle refuses it instead.
TIER_TYPES = frozenset({"MEM", "SSD", "HDD", "UFS", "DISK", "SPDK", "SPDK_DISK"})
_DATA_DIR = re.compile(r"^\[([\w:]*)\](.+)$")
_SIZE = re.compile(r"^([0-9.eE+-]+)\s*([KMGTP]B?|B)?$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}  # ByteUnit: binary


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    remedy: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("unknown-key", "Curvine ignores unknown keys silently; the default applies", "fix the key name"),
        Rule(
            "data-dir-tier",
            "a data_dir entry without a valid [TYPE] or [TYPE:capacity] prefix silently becomes DISK",
            "write [SSD:<capacity>]<path> (NVMe is SSD; types: " + ", ".join(sorted(TIER_TYPES)) + ")",
        ),
        Rule(
            "journal-hostname",
            "a master whose hostname is not in journal_addrs refuses to start",
            "list every master's hostname in [journal] journal_addrs",
        ),
        Rule(
            "format-flag",
            "format_master/format_worker default to true and wipe data at every start",
            "write format_master = false and format_worker = false explicitly",
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    rule: str
    key: str
    message: str

    @property
    def remedy(self) -> str:
        return RULES[self.rule].remedy


def size_bytes(text: object) -> int | None:
    """Bytes of a Curvine size string (500GB, 10G, any case), as ByteUnit::from_str reads it; None when
    Curvine would refuse it."""
    match = _SIZE.match(str(text).strip())
    if not match:
        return None
    try:
        return int(float(match.group(1)) * _UNITS[(match.group(2) or "").upper().rstrip("B")])
    except ValueError:
        return None


def parse(text: str, source: str = "curvine-cluster.toml") -> dict[str, Any]:
    """The TOML document, or a UserError naming the file, line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{source}: not valid TOML: {err}") from None


def unknown_keys(config: dict[str, Any]) -> list[Finding]:
    findings: list[Finding] = []

    def walk(table: dict[str, Any], path: str) -> None:
        allowed = KNOWN_KEYS[path]
        for key, value in table.items():
            where = f"{path.removesuffix('[]')}.{key}" if path else key
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                findings.append(Finding("unknown-key", where, f"{where} is not a Curvine v0.4.1 key{hint}"))
                continue
            child = f"{path.removesuffix('[]')}.{key}" if path else key
            if isinstance(value, dict) and child in KNOWN_KEYS:
                walk(value, child)
            elif isinstance(value, list) and f"{child}[]" in KNOWN_KEYS:
                for item in value:
                    if isinstance(item, dict):
                        walk(item, f"{child}[]")

    walk(config, "")
    return findings


def data_dir_findings(config: dict[str, Any]) -> list[Finding]:
    findings = []
    for entry in config.get("worker", {}).get("data_dir", []):
        match = _DATA_DIR.match(str(entry))
        parts = match.group(1).split(":") if match else []
        tier = parts[0].upper() if parts else ""
        capacity = parts[1] if len(parts) == 2 else ""
        if not match or len(parts) > 2 or tier not in TIER_TYPES or (capacity and not _SIZE.match(capacity)):
            findings.append(
                Finding("data-dir-tier", "worker.data_dir", f"data_dir entry {entry!r} is not typed")
            )
    return findings


def journal_findings(config: dict[str, Any]) -> list[Finding]:
    hostname = config.get("master", {}).get("hostname", "localhost")
    # Omitted journal_addrs default to one peer on localhost (JournalConf::default).
    addrs = config.get("journal", {}).get("journal_addrs", [{"hostname": "localhost"}])
    peers = {str(p.get("hostname")) for p in addrs if isinstance(p, dict)}
    if hostname in peers:
        return []
    return [
        Finding(
            "journal-hostname", "master.hostname", f"{hostname!r} is not in journal_addrs {sorted(peers)}"
        )
    ]


def format_findings(config: dict[str, Any]) -> list[Finding]:
    return [
        Finding("format-flag", flag, f"{flag} is {config.get(flag, 'absent (= true)')}")
        for flag in ("format_master", "format_worker")
        if config.get(flag, True) is not False
    ]


def log_destination(log: dict[str, Any]) -> str:
    """Where a `[*.log]` table sends the default log stream, as Curvine v0.4.1's Logger picks it
    (logger.rs, create_writer_named): "stdout" for an absent, empty or `stdout` log_dir (any case),
    "stderr" for `stderr`, else the rolling file `<log_dir>/<file_name, default curvine>.log`."""
    log_dir = str(log.get("log_dir", "stdout"))
    if log_dir == "" or log_dir.lower() == "stdout":
        return "stdout"
    if log_dir.lower() == "stderr":
        return "stderr"
    base = str(log.get("file_name", "")).removesuffix(".log") or "curvine"
    return f"{log_dir}/{base}.log"


def check(config: dict[str, Any]) -> list[Finding]:
    """Every finding for one parsed curvine-cluster.toml."""
    return (
        unknown_keys(config) + data_dir_findings(config) + journal_findings(config) + format_findings(config)
    )


def check_text(text: str, source: str = "curvine-cluster.toml") -> list[Finding]:
    return check(parse(text, source))
