#!/bin/bash
# A real Curvine (built from its source, not by this project) started from what the charts render: three
# masters and two workers on one host, FUSE clients started the way curvine-csi v0.4.1's embedded mode
# starts them, the charts' own helm-test scripts run as uid 1000, graceful stops and a restart.
#
#   sudo tools/curvine-real/verify.sh CURVINE_BIN_DIR [VALUES_FILE]
#
# CURVINE_BIN_DIR holds curvine-server, curvine-cli and curvine-fuse (for example target/release of
# `cargo build --release -p curvine-server -p curvine-cli -p curvine-fuse` in a Curvine checkout at the
# chart's appVersion). VALUES_FILE: the environment whose render is used (default values/prod-g6e-4xlarge.yaml).
# Only host names, ports and data paths are changed in the rendered config. Everything runs inside
# `unshare --net` (a network namespace of its own with loopback only: 127.0.0.x addresses), needs root
# (FUSE mounts, setpriv) and writes under a temporary folder it prints. Not part of the tests: Curvine
# cannot be built in CI's time; charts/curvine/README.md records what a run showed.
set -u
# stop_timed's arrays need bash >= 4.4 (an empty array under set -u).
if (( BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 4) )); then
  echo "verify.sh needs bash >= 4.4" >&2; exit 2
fi
if [ -z "${KVTIER_IN_NETNS:-}" ]; then
  exec env KVTIER_IN_NETNS=1 unshare --net "$0" "$@"
fi
B=$(cd "${1:?usage: verify.sh CURVINE_BIN_DIR [VALUES_FILE]}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VALUES=${2:-$ROOT/values/prod-g6e-4xlarge.yaml}
V=$(mktemp -d /tmp/curvine-real.XXXXXX) && chmod 755 "$V"  # uid 1000 runs the test scripts from here
echo "work folder: $V"
ip link set lo up
# curvine-fuse (enable_splice, the default) sizes its splice pipes 1 MiB + 4 KiB with F_SETPIPE_SZ: above
# the default fs.pipe-max-size (1 MiB) that needs CAP_SYS_RESOURCE, which the chart's privileged csi-plugin
# container has and a root shell in a container may lack. Raised for the run, restored on exit.
pipe_max=$(cat /proc/sys/fs/pipe-max-size)
trap 'echo "$pipe_max" > /proc/sys/fs/pipe-max-size' EXIT
[ "$pipe_max" -ge 2097152 ] || echo 2097152 > /proc/sys/fs/pipe-max-size
log() { printf '\n=== %s\n' "$*"; }

# A process has stopped when /proc no longer has it or it is a zombie (exited, not reaped yet).
alive() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; [ "${s%% *}" != Z ]; }
since() { echo "$(date +%s.%N) - $1" | bc; }
# stop_timed NAME=PID...: SIGTERM to every process given at the same moment, then, for each process on
# its own, the seconds from that SIGTERM until it was seen gone (checked every 0.05 s: an upper bound,
# at most one check late), compared with the chart's terminationGracePeriodSeconds for its kind (master-*
# or worker-*), after which Kubernetes would SIGKILL it. One still running 10 s past it is killed.
stop_timed() {
  local start elapsed p pid name grace rc left=("$@") still
  start=$(date +%s.%N)
  for p in "$@"; do kill -TERM "${p#*=}" 2>/dev/null; done
  while [ ${#left[@]} -gt 0 ]; do
    still=()
    for p in "${left[@]}"; do
      pid=${p#*=} name=${p%%=*}
      grace=$(cat "$V/grace-${name%%-*}")
      if ! alive "$pid"; then
        elapsed=$(since "$start")
        wait "$pid"; rc=$?
        printf '  %s: exited (rc=%s) by %.2f s after SIGTERM' "$name" "$rc" "$elapsed"
        if [ "$(echo "$elapsed > $grace" | bc)" = 1 ]; then
          echo " - over the chart's grace period of $grace s: Kubernetes would have sent SIGKILL"
        else
          echo " (grace period $grace s)"
        fi
      elif [ "$(echo "$(since "$start") > $grace + 10" | bc)" = 1 ]; then
        echo "  $name: still running $((grace + 10)) s after SIGTERM (grace period $grace s): SIGKILL"
        kill -KILL "$pid"; wait "$pid" 2>/dev/null
      else
        still+=("$p")
      fi
    done
    left=("${still[@]}")
    [ ${#left[@]} -eq 0 ] || sleep 0.05
  done
}

log "render: the umbrella for $VALUES (release rel, namespace kv), the curvine chart's cross-node test"
"$ROOT/.tools/bin/helm" template rel "$ROOT/charts/kv-tiered-inference" -n kv -f "$VALUES" > "$V/umbrella.yaml" || exit 2
"$ROOT/.tools/bin/helm" template rel "$ROOT/charts/curvine" -n kv --set pvc.enabled=true > "$V/curvine.yaml" || exit 2
"$ROOT/.venv/bin/python" - "$V" <<'PY' || exit 2
import sys, yaml
from pathlib import Path
out = Path(sys.argv[1])
def docs(name):
    return [d for d in yaml.safe_load_all((out / name).read_text()) if d]
for d in docs("umbrella.yaml"):
    if d["kind"] == "ConfigMap" and "curvine-cluster.toml" in d.get("data", {}):
        (out / "chart.toml").write_text(d["data"]["curvine-cluster.toml"])
    if d["kind"] == "Pod" and d["metadata"]["name"] == "rel-curvine-test-workers":
        (out / "test-workers.sh").write_text(d["spec"]["containers"][0]["args"][0])
    if d["kind"] in ("StatefulSet", "DaemonSet") and d["metadata"]["name"] in ("rel-curvine-master", "rel-curvine-worker"):
        grace = d["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        (out / f"grace-{d['metadata']['name'].rsplit('-', 1)[1]}").write_text(f"{grace}\n")
for d in docs("curvine.yaml"):
    if d["kind"] == "Job" and d["metadata"]["name"] == "rel-curvine-test-crossnode":
        (out / "test-crossnode.sh").write_text(d["spec"]["template"]["spec"]["containers"][0]["args"][0])
for name in ("chart.toml", "test-workers.sh", "test-crossnode.sh", "grace-master", "grace-worker"):
    assert (out / name).is_file(), f"{name} not found in the render"
PY

# Configs: the rendered file with host names, ports and data paths changed only. Three masters on
# 127.0.0.1-3 (same ports, own addresses), workers on 127.0.0.11 and .12; web ports made distinct.
sub_hosts() { sed -e 's/rel-curvine-master-0\.rel-curvine-master\.kv\.svc\.cluster\.local/127.0.0.1/g' \
                  -e 's/rel-curvine-master-1\.rel-curvine-master\.kv\.svc\.cluster\.local/127.0.0.2/g' \
                  -e 's/rel-curvine-master-2\.rel-curvine-master\.kv\.svc\.cluster\.local/127.0.0.3/g' "$V/chart.toml"; }
mk() {  # mk <name> <master web> <worker web> <data dir> <master data>
  sub_hosts | sed -e "s#/opt/curvine/data/curvine#$5#g" \
      -e "s#^web_port = 9000#web_port = $2#" -e "s#^web_port = 9001#web_port = $3#" \
      -e "s#\]/opt/dlami/nvme/curvine-data#]$4#" > "$V/run/$1.toml"
}
rm -rf "$V/run"; mkdir -p "$V/run"
for i in 1 2 3; do mk m$i 90${i}0 9001 "$V/run/w1" "$V/run/m$i"; done
mk w1 9000 9001 "$V/run/w1" "$V/run/unused"
mk w2 9000 9011 "$V/run/w2" "$V/run/unused"
diff "$V/chart.toml" "$V/run/m2.toml"
diff "$V/chart.toml" "$V/run/w2.toml"

log "3 masters + 2 workers (curvine-server --service ... --conf ..., as the chart's command)"
for i in 1 2 3; do
  ORPC_BIND_HOSTNAME=127.0.0.$i CURVINE_MASTER_HOSTNAME=127.0.0.$i "$B/curvine-server" --service master --conf "$V/run/m$i.toml" > "$V/run/m$i.log" 2>&1 &
  eval "M$i=\$!"
done
sleep 8
ORPC_BIND_HOSTNAME=127.0.0.11 CURVINE_WORKER_HOSTNAME=127.0.0.11 CURVINE_CLIENT_HOSTNAME=127.0.0.11 "$B/curvine-server" --service worker --conf "$V/run/w1.toml" > "$V/run/w1.log" 2>&1 &
W1=$!
ORPC_BIND_HOSTNAME=127.0.0.12 CURVINE_WORKER_HOSTNAME=127.0.0.12 CURVINE_CLIENT_HOSTNAME=127.0.0.12 "$B/curvine-server" --service worker --conf "$V/run/w2.toml" > "$V/run/w2.log" 2>&1 &
W2=$!
for i in $(seq 1 30); do  # until both workers have registered
  "$B/curvine-cli" report --conf "$V/run/m1.toml" 2>/dev/null | grep -q 'live_worker_num: 2' && break; sleep 2
done
grep -h "became leader" "$V"/run/m*.log | head -3
"$B/curvine-cli" report --conf "$V/run/m1.toml" | grep -E 'live_worker_num|lost_worker_num|live_worker_list' -A1
MASTER=$M1

log "CSI controller as the chart runs it: curvine-cli fs mkdir -p as uid 1000, CURVINE_CONF_FILE = rendered config"
as1000() { setpriv --reuid 1000 --regid 1000 --clear-groups "$@"; }
CURVINE_CONF_FILE="$V/run/m1.toml" as1000 "$B/curvine-cli" fs mkdir -p /l2cache --master-addrs 127.0.0.1:8995,127.0.0.2:8995,127.0.0.3:8995
CURVINE_CONF_FILE="$V/run/m1.toml" as1000 "$B/curvine-cli" fs mkdir -p /l2cache/pvc-chart --master-addrs 127.0.0.1:8995,127.0.0.2:8995,127.0.0.3:8995
log "upstream default for comparison: uid 65532, no config (umask 022)"
setpriv --reuid 65532 --regid 65532 --clear-groups "$B/curvine-cli" fs mkdir -p /l2cache/pvc-upstream --master-addrs 127.0.0.1:8995,127.0.0.2:8995,127.0.0.3:8995
"$B/curvine-cli" fs ls /l2cache --conf "$V/run/m1.toml"

log "two FUSE clients, started as curvine-csi's fuse_manager.go does (no --conf), cwd with conf/ = rendered config"
fuse() {  # fuse <name> <fs path> <extra args...>
  local dir="$V/run/csi-$1"; mkdir -p "$dir/conf" "$V/run/mnt-$1"; cp "$V/run/m1.toml" "$dir/conf/curvine-cluster.toml"
  (cd "$dir" && CURVINE_CLIENT_HOSTNAME=$CLIENT exec "$B/curvine-fuse" --master-addrs 127.0.0.1:8995,127.0.0.2:8995,127.0.0.3:8995 --fs-path "$2" \
     --mnt-path "$V/run/mnt-$1" "${@:3}" > "$V/run/fuse-$1.log" 2>&1) &
}
CLIENT=127.0.0.11 fuse a /l2cache/pvc-chart
CLIENT=127.0.0.12 fuse b /l2cache/pvc-chart --web-port 9012   # storageClass.fuseParameters: {web-port: "9012"}
CLIENT=127.0.0.11 fuse up /l2cache/pvc-upstream --web-port 9013
sleep 6
mount | grep "$V/run/mnt" || echo "no FUSE mounts"
grep -h 'Loaded configuration\|metrics server' "$V"/run/fuse-*.log
ls -ldn "$V/run/mnt-a" "$V/run/mnt-b" "$V/run/mnt-up"
log "write as uid 1000: chart's volume, then the upstream-default volume"
as1000 sh -c "echo ok > $V/run/mnt-a/probe && cat $V/run/mnt-b/probe"
as1000 sh -c "echo ok > $V/run/mnt-up/probe" || echo "upstream default: write refused as expected"
log "block size the FUSE client uses (chart: 64MB, image default: 128MB)"
as1000 dd if=/dev/urandom of="$V/run/mnt-a/big" bs=1M count=80 status=none
"$B/curvine-cli" fs blocks /l2cache/pvc-chart/big --conf "$V/run/m1.toml" 2>&1 | head -8
"$B/curvine-cli" fs stat /l2cache/pvc-chart/big --conf "$V/run/m1.toml" 2>&1 | grep -i 'block\|len' | head -4
cmp "$V/run/mnt-a/big" "$V/run/mnt-b/big" && echo "cross-mount read identical"
cp "$V/run/mnt-a/big" "$V/run/big.copy"

log "rendered helm test test-crossnode as uid 1000: writer on mount a, reader on mount b"
run_crossnode() {  # <index> <mount> <node>
  sed "s#/l2/#$V/run/mnt-$2/#g" "$V/test-crossnode.sh" > "$V/run/crossnode-$1.sh"
  as1000 env JOB_COMPLETION_INDEX="$1" RUN_ID=run-42 NODE_NAME="$3" bash "$V/run/crossnode-$1.sh"
}
run_crossnode 0 a node-a & P0=$!
run_crossnode 1 b node-b; echo "reader rc=$?"
wait $P0; echo "writer rc=$?"

log "rendered helm test test-workers as uid 1000 (stand-in: the DaemonSet's desiredNumberScheduled = 2)"
mkdir -p "$V/run/tmp-1000" && chown 1000:1000 "$V/run/tmp-1000"  # the pod's /tmp emptyDir
sed -e 's|desired=$(scheduled 2>/tmp/api.err)|desired=2  # stand-in for the DaemonSet status|' \
    -e "s#/tmp/\(api\|cv\)\.err#$V/run/tmp-1000/\1.err#g" \
    -e "s#/app/curvine/bin/cv report --conf /etc/curvine/curvine-cluster.toml#$B/curvine-cli report --conf $V/run/m1.toml#" \
    -e 's#deadline=$((SECONDS + 180))#deadline=$((SECONDS + 20))#' "$V/test-workers.sh" > "$V/run/test-workers-local.sh"
as1000 bash "$V/run/test-workers-local.sh"; echo "test-workers rc=$?"

log "SIGTERM to worker 2 alone (curvine-server as the process itself)"
stop_timed "worker-2=$W2"
tail -5 "$V/run/w2.log"
as1000 bash "$V/run/test-workers-local.sh"; echo "test-workers after stopping worker 2: rc=$?"

log "the image's entrypoint pattern as PID 1 (bash, background | tee, no trap), for comparison"
cat > "$V/run/entry.sh" <<EOF
"$B/curvine-server" --service worker --conf "$V/run/w2.toml" 2>&1 | tee "$V/run/w2-entry.out" &
TEE=\$!
wait \$TEE
EOF
ORPC_BIND_HOSTNAME=127.0.0.12 CURVINE_WORKER_HOSTNAME=127.0.0.12 unshare --pid --fork bash "$V/run/entry.sh" > /dev/null 2>&1 &
U=$!
sleep 6
INIT=$(pgrep -P $U bash); echo "PID-1 shell in its namespace: $INIT"
start=$(date +%s.%N); kill -TERM "$INIT"
for i in $(seq 1 15); do kill -0 "$INIT" 2>/dev/null || break; sleep 1; done
if kill -0 "$INIT" 2>/dev/null; then echo "entrypoint pattern: still running 15 s after SIGTERM (SIGTERM dropped by PID 1)"; kill -KILL "$INIT"; else echo "entrypoint pattern exited after $(echo "$(date +%s.%N) - $start" | bc) s"; fi
wait $U 2>/dev/null

log "clean up"
for m in a b up; do umount "$V/run/mnt-$m" 2>/dev/null || umount -l "$V/run/mnt-$m"; done
log "SIGTERM one process at a time, as a rolling update stops pods: worker 1, then masters 3, 2, 1"
echo "(each time is that process's own; master 1, stopped last, has no quorum left)"
stop_timed "worker-1=$W1"
stop_timed "master-3=$M3"
stop_timed "master-2=$M2"
stop_timed "master-1=$M1"
log "restart with the same configs: data kept (format flags false)"
for i in 1 2 3; do
  ORPC_BIND_HOSTNAME=127.0.0.$i CURVINE_MASTER_HOSTNAME=127.0.0.$i "$B/curvine-server" --service master --conf "$V/run/m$i.toml" > "$V/run/m$i-2.log" 2>&1 &
  eval "M$i=\$!"
done
sleep 8
ORPC_BIND_HOSTNAME=127.0.0.11 CURVINE_WORKER_HOSTNAME=127.0.0.11 "$B/curvine-server" --service worker --conf "$V/run/w1.toml" > "$V/run/w1-2.log" 2>&1 &
W1=$!
ORPC_BIND_HOSTNAME=127.0.0.12 CURVINE_WORKER_HOSTNAME=127.0.0.12 "$B/curvine-server" --service worker --conf "$V/run/w2.toml" > "$V/run/w2-2.log" 2>&1 &
W2=$!
sleep 10
"$B/curvine-cli" fs ls /l2cache/pvc-chart --conf "$V/run/m1.toml"
log "curvine-cli fs cat with the rendered config: stdout is the file's bytes only ([cli.log] log_dir = stderr)"
"$B/curvine-cli" fs cat /l2cache/pvc-chart/probe --conf "$V/run/m1.toml" > "$V/run/cat.out" 2> "$V/run/cat.err"
echo "fs cat rc=$?; stdout: $(od -c "$V/run/cat.out" | head -3)"
if [ "$(cat "$V/run/cat.out")" = ok ]; then echo "stdout holds exactly the file"; else echo "stdout is not the file alone"; fi
echo "stderr: $(wc -l < "$V/run/cat.err") line(s)"; head -3 "$V/run/cat.err"
mkdir -p "$V/run/mnt-c"; (cd "$V/run/csi-a" && CURVINE_CLIENT_HOSTNAME=127.0.0.11 exec "$B/curvine-fuse" --master-addrs 127.0.0.1:8995,127.0.0.2:8995,127.0.0.3:8995 --fs-path /l2cache/pvc-chart --mnt-path "$V/run/mnt-c" > "$V/run/fuse-c.log" 2>&1) &
sleep 5
cmp "$V/run/mnt-c/big" "$V/run/big.copy" && echo "80 MB file after restart identical"
umount "$V/run/mnt-c" 2>/dev/null || umount -l "$V/run/mnt-c"
log "SIGTERM to all five at once, as an uninstall stops pods"
stop_timed "master-1=$M1" "master-2=$M2" "master-3=$M3" "worker-1=$W1" "worker-2=$W2"
jobs -p | xargs -r kill 2>/dev/null
echo done
