#!/usr/bin/env bash
# Moving a replica of a large partition under load (BENCHMARKS.md,
# "Replica move"): 4 raftq server nodes; partition big/0 on nodes 1,2,3
# is filled with SIZE_MB of 1 KiB records, then moved to 4,2,3 with
# raftq partition move --wait while raftq bench offers RATE records/s to
# another topic (6 partitions, RF 3). The same bench runs once before
# the move, without it, for the p99 to compare. Beside it, in the same
# run, a plain loopback copy of big/0's segment files into a file on the
# same disk (TCP over 127.0.0.1, then fsync): the floor of a catch-up.
#
# usage: docs/bench-move.sh RAFTQ OUTDIR [SIZE_MB] [RATE] [THROTTLE]
#   RAFTQ     a built raftq binary (go build -o /tmp/raftq ./cmd/raftq)
#   OUTDIR    data dirs, node logs, bench-*.txt, events.txt
#   SIZE_MB   megabytes to fill big/0 with (1024)
#   RATE      records/s of the background bench (20000)
#   THROTTLE  the nodes' --reassignment-bytes-per-sec (0: unbounded)
set -euo pipefail
bin=$1 out=$2 size=${3:-1024} rate=${4:-20000} throttle=${5:-0}
ports=(0 39392 39393 39394 39395) # kafka; peers +100, admin +200
cluster="1=127.0.0.1:39492,2=127.0.0.1:39493,3=127.0.0.1:39494,4=127.0.0.1:39495"
brokers="127.0.0.1:39392,127.0.0.1:39393,127.0.0.1:39394,127.0.0.1:39395"
mkdir -p "$out"
declare -a pids

log() { echo "$(date -u +%T.%N | cut -c1-12) $*" | tee -a "$out/events.txt"; }

start() {
	local i=$1 k=${ports[$1]}
	"$bin" server --node-id "$i" --cluster-id mv --data-dir "$out/n$i" --kafka-addr "127.0.0.1:$k" \
		--peer-addr "127.0.0.1:$((k + 100))" --admin-addr "127.0.0.1:$((k + 200))" \
		--initial-cluster "$cluster" --reassignment-bytes-per-sec "$throttle" >>"$out/n$i.log" 2>&1 &
	pids[$i]=$!
	until curl -sf "http://127.0.0.1:$((k + 200))/v1/status" >/dev/null; do sleep 0.1; done
}

for i in 1 2 3 4; do start "$i"; done
trap 'kill -KILL ${pids[1]} ${pids[2]} ${pids[3]} ${pids[4]} 2>/dev/null; wait' EXIT
until "$bin" cluster status --admin 127.0.0.1:39592 2>/dev/null | grep -c ' true ' | grep -q 4; do sleep 0.2; done
log "4 nodes alive"

# big/0 on nodes 1, 2, 3, filled with 1 KiB records.
"$bin" topic create big --brokers "$brokers" -p 1 -r 3 -c segment.bytes=268435456 >/dev/null
"$bin" partition move big/0 --replicas 1,2,3 --brokers "$brokers" --wait >/dev/null
records=$((size * 1024))
log "filling big/0 with $size MB"
"$bin" bench --brokers "$brokers" --topic big --partitions 1 --record-size 1024 --records "$records" \
	--producers 2 >"$out/fill.txt" 2>&1
bytes=$(du -sb "$out/n1/log/big-0" | cut -f1)
log "big/0 holds $bytes bytes on node 1"

# The floor: the segments over loopback TCP into a file on the same disk, fsynced.
python3 - "$out/n1/log/big-0" "$out/copy.bin" <<'EOF' | tee -a "$out/events.txt"
import glob, os, socket, sys, threading, time
src, dst = sys.argv[1], sys.argv[2]
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def recv():
    c, _ = srv.accept()
    with open(dst, "wb") as f:
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            f.write(b)
        f.flush(); os.fsync(f.fileno())
t = threading.Thread(target=recv); t.start()
start = time.monotonic(); total = 0
s = socket.create_connection(srv.getsockname())
for name in sorted(glob.glob(os.path.join(src, "*.log"))):
    with open(name, "rb") as f:
        total += s.sendfile(f)
s.close(); t.join()
took = time.monotonic() - start
print(f"loopback copy: {total} bytes in {took:.2f} s = {total / took / 1e6:.0f} MB/s")
EOF
rm -f "$out/copy.bin"

bench() { # bench NAME: the background load for 30 s, after a 3 s warmup
	"$bin" bench --brokers "$brokers" --topic load --partitions 6 --rate "$rate" --warmup 3s \
		--duration 30s --interval 1s >"$out/bench-$1.txt" 2>&1
}

log "bench without a move"
bench idle
log "bench with the move of big/0 from 1,2,3 to 4,2,3"
bench move &
b=$!
sleep 8
t0=$(date +%s.%N)
"$bin" partition move big/0 --replicas 4,2,3 --brokers "$brokers" --wait >>"$out/events.txt"
t1=$(date +%s.%N)
moved=$(du -sb "$out/n4/log/big-0" | cut -f1)
log "move done: $moved bytes on node 4 in $(echo "$t1 - $t0" | bc) s = $(echo "$moved / ($t1 - $t0) / 1000000" | bc) MB/s"
wait "$b" || true
for f in idle move; do
	log "bench-$f: $(grep -E '(records/s|^latency)' "$out/bench-$f.txt" | tr '\n' ' ')"
done
