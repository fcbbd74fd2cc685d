#!/usr/bin/env bash
# A rolling restart of 3 raftq server nodes under raftq bench load
# (BENCHMARKS.md, "Rolling restart"): each node in turn gets SIGTERM, is
# waited for, started again and waited for until the cluster is whole
# (every broker alive, every partition led, every ISR full); the next
# node follows 10 s later, so that each restart's effect on the clients,
# and the leader balance that hands the restarted node its partitions
# back, stand apart.
#
# usage: docs/bench-rolling-restart.sh RAFTQ OUTDIR SHUTDOWN_TIMEOUT raft|isr [RATE]
#   RAFTQ             a built raftq binary (go build -o /tmp/raftq ./cmd/raftq)
#   OUTDIR            data dirs, node logs, bench.txt (the bench's output), events.txt
#   SHUTDOWN_TIMEOUT  the nodes' --shutdown-timeout (0: no drain)
#   RATE              records/s the bench offers (20000); DURATION in the environment: the bench's (60s)
set -euo pipefail
bin=$1 out=$2 timeout=$3 mode=$4 rate=${5:-20000} duration=${DURATION:-60s}
topic=rr-$mode
ports=(0 39092 39093 39094) # kafka; peers +100, admin +200
cluster="1=127.0.0.1:39192,2=127.0.0.1:39193,3=127.0.0.1:39194"
brokers="127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094"
mkdir -p "$out"
declare -a pids

log() { echo "$(date -u +%T.%N | cut -c1-12) $*" | tee -a "$out/events.txt"; }

start() {
	local i=$1 k=${ports[$1]}
	"$bin" server --node-id "$i" --cluster-id rr --data-dir "$out/n$i" --kafka-addr "127.0.0.1:$k" \
		--peer-addr "127.0.0.1:$((k + 100))" --admin-addr "127.0.0.1:$((k + 200))" \
		--initial-cluster "$cluster" --shutdown-timeout "$timeout" >>"$out/n$i.log" 2>&1 &
	pids[$i]=$!
	until curl -sf "http://127.0.0.1:$((k + 200))/v1/status" >/dev/null; do sleep 0.1; done
}

# status I PYTHON: runs PYTHON on node I's /v1/status (as s); true if it prints yes.
status() {
	curl -sf "http://127.0.0.1:$((${ports[$1]} + 200))/v1/status" |
		python3 -c "import json,sys; s=json.load(sys.stdin); t='$topic'; print('yes' if ($2) else 'no')" 2>/dev/null | grep -q yes
}

whole() {
	local i
	for i in 1 2 3; do
		status "$i" "all(b['alive'] for b in s['brokers']) and len(s['brokers'])==3 and
			len([p for p in s['partitions'] if p['topic']==t])==6 and
			all(p['leader'] and (p.get('mode')!='isr' or len(p.get('isr') or [])==3) for p in s['partitions'] if p['topic']==t)" || return 1
	done
}

leads() { status "$1" "any(p['role']=='leader' for p in s['partitions'] if p['topic']==t)"; }

waitfor() { # waitfor SECONDS WHAT CMD...: polls CMD until it holds
	local end=$((SECONDS + $1)) what=$2
	shift 2
	until "$@"; do
		((SECONDS < end)) || { log "gave up waiting for $what"; return 1; }
		sleep 0.2
	done
}

for i in 1 2 3; do start "$i"; done
trap 'kill -KILL ${pids[1]} ${pids[2]} ${pids[3]} 2>/dev/null; wait' EXIT
waitfor 60 "every broker alive" status 1 "len(s['brokers'])==3 and all(b['alive'] for b in s['brokers'])"
cfg=()
[ "$mode" = isr ] && cfg=(-c replication.mode=isr -c min.insync.replicas=2)
"$bin" bench --brokers "$brokers" --topic "$topic" --partitions 6 --rate "$rate" --interval 1s \
	--warmup 3s --duration "$duration" "${cfg[@]}" >"$out/bench.txt" 2>&1 &
bench=$!
log "bench started, shutdown-timeout $timeout, mode $mode, rate $rate"
sleep 10
waitfor 60 "the cluster whole" whole
for i in 1 2 3; do
	waitfor 30 "node $i to lead" leads "$i"
	log "SIGTERM node $i"
	kill -TERM "${pids[$i]}"
	wait "${pids[$i]}" || true
	log "node $i exited"
	start "$i"
	log "node $i answers again"
	waitfor 60 "the cluster whole" whole
	log "cluster whole"
	sleep 10
done
log "rolling restart done"
wait "$bench" || true
log "bench done"
grep -h "leadership drain" "$out"/n?.log >>"$out/events.txt" || true
