# Sourced by the scripts/bench-* scripts (not run): the benchmark data and the median of
# fresh runs, the same way in each.

# bench_data SLUICE DIR KIND...: makes each missing data set DIR/KIND of the standard
# size (tabular: 2M records in 16 shards; image: 50k 64x64x3 raw in 16; jpeg: 20k
# 128x128 JPEGs in 8) with `sluice gen`, its output on stderr (stdout may be JSON).
bench_data() {
  local sluice=$1 dir=$2 kind
  shift 2
  for kind in "$@"; do
    [[ -d "$dir/$kind" ]] && continue
    case "$kind" in
      tabular) "$sluice" gen tabular --records 2000000 --shards 16 --out "$dir/tabular" >&2 ;;
      image) "$sluice" gen image --records 50000 --shards 16 --out "$dir/image" >&2 ;;
      jpeg) "$sluice" gen jpeg --records 20000 --shards 8 --out "$dir/jpeg" >&2 ;;
      *) echo "bench_data: no data set $kind" >&2; return 1 ;;
    esac
  done
}

# median_json N CMD...: runs CMD (which prints one JSON line with `records_per_s` or
# `records_per_sec`) N times, each a fresh process, and prints the median run's line
# by rate, with `records_per_s` (and `peak_rss_mb` from `peak_rss_bytes`) set. The runs
# write to a file read when all are done: nothing runs beside a measured process (on a
# 2-core machine a parser started beside a run takes its start-up, ~0.04 s of CPU, from
# that run's first epoch).
median_json() {
  local n=$1 lines
  shift
  lines=$(mktemp)
  for _ in $(seq "$n"); do
    "$@" >> "$lines" || { rm -f "$lines"; return 1; }
  done
  python3 -c '
import json, sys
runs = []
for l in sys.stdin:
    if l.startswith("{"):
        r = json.loads(l)
        r.setdefault("records_per_s", r.get("records_per_sec"))
        r.setdefault("peak_rss_mb", r.get("peak_rss_bytes", 0) / 2**20)
        runs.append(r)
if not runs:
    sys.exit("median_json: no JSON line from the runs")
runs.sort(key=lambda r: r["records_per_s"])
print(json.dumps(runs[len(runs) // 2]))' < "$lines" || { rm -f "$lines"; return 1; }
  rm -f "$lines"
}
