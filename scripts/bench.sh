#!/usr/bin/env bash
# Scale benchmark: simulate jobs of 1k and 4k ranks (and 16k with --16k),
# analyse each, and print input size, wall time, MB/s and peak RSS of both
# steps. The jobs go to a temporary folder that is removed afterwards.
#
#   scripts/bench.sh            # 1024 and 4096 ranks
#   scripts/bench.sh --16k      # also 16384 ranks (about 2 GB of logs)
#   SIZES="256 1024" CAUSE=rank_stalled LAYOUT=torchrun scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"1024 4096"}
if [[ "${1:-}" == "--16k" ]]; then SIZES="$SIZES 16384"; fi
CAUSE=${CAUSE:-link_flap}
LAYOUT=${LAYOUT:-nccl-files}
SEED=${SEED:-1}

cargo build --release --quiet
BIN=target/release/ncclpm
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ncclpm-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Runs a command under /usr/bin/time -v (GNU time) when there is one and
# prints "wall_seconds peak_rss_kb"; without it, wall time only.
timed() {
  local log="$TMP/time.log"
  if [[ -x /usr/bin/time ]] && /usr/bin/time -v true >/dev/null 2>&1; then
    /usr/bin/time -v "$@" 2>"$log" >/dev/null
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log" |
      awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
    echo "$wall $rss"
  else
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s.%N)
    echo "$(echo "$end - $start" | bc) 0"
  fi
}

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b / 1e6 / s; else print "-" }'; }

printf '%-7s %7s %9s | %9s %7s %9s | %9s %7s %9s | %s\n' \
  ranks files "size MB" "sim s" "MB/s" "sim RSS" "analyze s" "MB/s" "RSS MB" "verdict (truth)"
for n in $SIZES; do
  job="$TMP/job-$n"
  read -r swall srss < <(timed "$BIN" simulate --cause "$CAUSE" --ranks "$n" --seed "$SEED" --layout "$LAYOUT" -q "$job")
  bytes=$(du -sb "$job" | cut -f1)
  files=$(find "$job" -type f | wc -l)
  read -r awall arss < <(timed "$BIN" analyze "$job" -o "$TMP/out-$n" --json-only -q)
  got=$(grep -o '"kind": *"[a-z_]*"' "$TMP/out-$n/report.json" | head -1 | sed 's/.*"\([a-z_]*\)"$/\1/')
  want=$(grep -o '"kind": *"[a-z_]*"' "$job.truth.json" | head -1 | sed 's/.*"\([a-z_]*\)"$/\1/')
  printf '%-7s %7s %9.1f | %9.2f %7s %6.0f MB | %9.2f %7s %9.0f | %s (%s)\n' \
    "$n" "$files" "$(awk -v b="$bytes" 'BEGIN{print b/1e6}')" \
    "$swall" "$(mbps "$bytes" "$swall")" "$(awk -v k="$srss" 'BEGIN{print k/1024}')" \
    "$awall" "$(mbps "$bytes" "$awall")" "$(awk -v k="$arss" 'BEGIN{print k/1024}')" \
    "${got:-?}" "${want:-?}"
  rm -rf "$job" "$job.truth.json" "$TMP/out-$n"
done
