#!/usr/bin/env bash
# verdict-table.sh runs `raftq jepsen run` once per nemesis and cluster
# size, one after another, and prints a markdown table of the verdicts
# (jepsen/RESULTS.md holds one). Needs root, ip, iptables, /dev/fuse, jq.
#
#   go build -o /tmp/raftq ./cmd/raftq     # without -race
#   jepsen/scripts/verdict-table.sh /tmp/raftq /tmp/verdicts 300s
#
# Environment: NEMESES (default "kill pause partition lose-unfsynced"),
# SIZES ("3 5"), RATE (2000), CONCURRENCY (12), SEED (7), EXTRA (more flags).
set -u
bin=${1:?usage: verdict-table.sh RAFTQ_BINARY OUT_DIR [TIME]}
out=${2:?usage: verdict-table.sh RAFTQ_BINARY OUT_DIR [TIME]}
time=${3:-300s}
nemeses=${NEMESES:-kill pause partition lose-unfsynced}
sizes=${SIZES:-3 5}
rate=${RATE:-2000}
conc=${CONCURRENCY:-12}
seed=${SEED:-7}
mkdir -p "$out"

for n in $sizes; do
	for nem in $nemeses; do
		dir="$out/$nem-$n"
		rm -rf "$dir"
		echo "== $(date -u +%FT%TZ) $nem, $n nodes, $time" >&2
		"$bin" jepsen run --nodes "$n" --nemesis "$nem" --time "$time" --rate "$rate" \
			--concurrency "$conc" --acks all --fsync always --seed "$seed" \
			--report-dir "$dir" ${EXTRA:-} >"$dir.out" 2>"$dir.err"
		echo "exit $?" >>"$dir.out"
		cat "$dir.out" >&2
	done
done

echo "| nemesis | nodes | verdict | ok sends/s | ok ops/s | sends ok / info / fail | faults | anomalies | crashes |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $sizes; do
	for nem in $nemeses; do
		dir="$out/$nem-$n"
		if [ ! -f "$dir/results.json" ]; then
			echo "| $nem | $n | no results (see $dir.err) | | | | | | |"
			continue
		fi
		jq -r --arg nem "$nem" --arg n "$n" --slurpfile f "$dir/nemesis.json" '
			[.checkers[] | select(.verdict != "ok") | "\(.name) \(.verdict) \(.count)"] as $bad |
			"| \($nem) | \($n) | \(.verdict) | \(.stats.ok_sends_per_sec | floor) | \(.stats.ok_ops_per_sec | floor) | " +
			"\(.stats.by_f.send.ok // 0) / \(.stats.by_f.send.info // 0) / \(.stats.by_f.send.fail // 0) | " +
			"\([$f[0].faults[] | select(.phase == "start" and .error == null)] | length) | " +
			"\(if ($bad | length) == 0 then "none" else ($bad | join(", ")) end) | " +
			"\($f[0].crashes // [] | length) |"' "$dir/results.json"
	done
done
