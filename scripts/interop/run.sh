#!/usr/bin/env bash
# Interop check against REAL TensorFlow, both directions:
#   sluice -> TF : `sluice gen` writes tabular/image/jpeg datasets (compression none, gzip,
#                  zlib); TensorFlow (tf.data + protobuf + tf.io parser) must read every
#                  file back to exactly what `sluice cat` prints (tf_check.py), and the
#                  records must parse with the real schema and hold what it promises
#                  (tf_schema_check.py); the shards `sluice run --output` exports read
#                  back through tf.io.parse_single_example (export_check.py).
#   TF -> sluice : bench/make_data.py writes the benchmark datasets with TF's own
#                  TFRecordWriter; `sluice cat` must print every file exactly like
#                  MessageToJson of TF's own read (tf_to_jsonl.py + jsonl_compare.py),
#                  with the record counts of make_data's manifest.
#   Parquet      : files written by pyarrow, `datasets` and polars read by `parquet(files)`
#                  equal to pyarrow's own reading (parquet_check.py).
#   WebDataset   : shards written by webdataset.TarWriter read by `webdataset(files)`
#                  equal to webdataset.WebDataset's samples (webdataset_check.py).
#   Output       : `sluice run --output --format parquet|webdataset` read back by pyarrow
#                  and webdataset.WebDataset equal to `sluice show` (output_check.py).
#
# Usage: scripts/interop/run.sh        (from any directory)
# Environment:
#   SLUICE_TF_PYTHON=PY    a Python that already has TensorFlow (default: REPO/.venv-tf,
#                          created with tensorflow-cpu==2.21.0 on first use)
#   SLUICE_BIN=PATH        use this sluice binary instead of `cargo build --release -p sluice`
#   SLUICE_INTEROP_KEEP=1  keep the temporary directory (its path is printed)
# Every file check (and every dataset's schema check) counts as one; the last line is
# `interop: N passed, M failed` and the exit status is non-zero if M > 0.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
ROOT="$(cd "$HERE/../.." && pwd -P)"
SEED=20251121

export TF_CPP_MIN_LOG_LEVEL=3
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ next to the scripts

die() { echo "interop: error: $*" >&2; exit 2; }

START=$SECONDS
TMP="$(mktemp -d "${TMPDIR:-/tmp}/sluice-interop.XXXXXX")"
if [[ "${SLUICE_INTEROP_KEEP:-}" == 1 ]]; then
    echo "interop: keeping the work dir $TMP (SLUICE_INTEROP_KEEP=1)"
else
    trap 'rm -rf "$TMP"' EXIT
fi

# ---------------------------------------------------------------- TensorFlow Python
# scripts/tf-python honours SLUICE_TF_PYTHON and installs .venv-tf on first use.
PY="$("$ROOT/scripts/tf-python")" || die "could not set up a Python with TensorFlow"
"$PY" -c 'import tensorflow' >/dev/null 2>&1 || die "$PY cannot import tensorflow"
TF_VERSION="$("$PY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)"

# ---------------------------------------------------------------- sluice
if [[ -n "${SLUICE_BIN:-}" ]]; then
    SLUICE="$SLUICE_BIN"
else
    echo "interop: building sluice (cargo build --release -p sluice)"
    (cd "$ROOT" && cargo build --release -q -p sluice)
    TARGET_DIR="${CARGO_TARGET_DIR:-target}"
    [[ "$TARGET_DIR" == /* ]] || TARGET_DIR="$ROOT/$TARGET_DIR"
    SLUICE="$TARGET_DIR/release/sluice"
fi
[[ -x "$SLUICE" ]] || die "no sluice binary at $SLUICE"
# The runners `sluice show|run` compile for the checks below: unoptimized, in the target
# directory the cargo tests' runners use (the runtime is compiled there already when
# `cargo test` ran first, as in scripts/test), so each check compiles only its generated
# crate. The values are the same in either profile (no fast-math); only speed differs,
# and these datasets are small.
export SLUICE_RUN_PROFILE="${SLUICE_RUN_PROFILE:-dev}"
# With the cargo tests' feature too (tests/it/support.rs), so that the runtime compiled
# there serves the runners of pipelines that read no Parquet as well.
export SLUICE_RUN_FEATURES="${SLUICE_RUN_FEATURES-parquet}"
if [[ -z "${SLUICE_TARGET_DIR:-}" ]]; then
    RUN_TARGET="${CARGO_TARGET_DIR:-target}"
    [[ "$RUN_TARGET" == /* ]] || RUN_TARGET="$ROOT/$RUN_TARGET"
    export SLUICE_TARGET_DIR="$RUN_TARGET/tmp/sluice-run-target"
fi
echo "interop: sluice $SLUICE, python $PY (TensorFlow $TF_VERSION), work dir $TMP, runners $SLUICE_RUN_PROFILE in $SLUICE_TARGET_DIR"

# ---------------------------------------------------------------- bookkeeping
PASS=0
FAIL=0
FAILED=()
LOGN=0

# Show a failed command's output without TF's start-up chatter.
show_log() {
    grep -v -e 'All log messages before absl::InitializeLog' -e '^I0000 ' \
        -e 'To enable the following instructions' -e 'rebuild TensorFlow with the appropriate' "$1" \
        | tail -n 25 | sed 's/^/    /' || true
}

# A section's title, with the seconds the check has run so far (where CI's time goes).
section() {
    echo "== $* (at $((SECONDS - START)) s)"
}

# check LABEL CMD...: run CMD with its output in a log; count one pass or one failure.
check() {
    local label="$1"
    shift
    LOGN=$((LOGN + 1))
    local log="$TMP/log.$LOGN"
    if "$@" >"$log" 2>&1; then
        PASS=$((PASS + 1))
        return 0
    fi
    FAIL=$((FAIL + 1))
    FAILED+=("$label")
    echo "FAIL $label"
    show_log "$log"
    return 1
}

# A failure that is not a command of its own (e.g. a missing file).
fail() {
    FAIL=$((FAIL + 1))
    FAILED+=("$1")
    echo "FAIL $1${2:+: $2}"
}

# Checks run by tf_batch.py, many in one Python process (TensorFlow imported once, not
# some 50 times): `queue SCRIPT ARGS...` adds one, its log in QUEUED_LOG; `run_queue` runs
# those queued; `queued LABEL LOG` then counts one's result as `check` counts a command's.
JOBS="$TMP/jobs"
queue() {
    LOGN=$((LOGN + 1))
    QUEUED_LOG="$TMP/log.$LOGN"
    local IFS=$'\t'
    printf '%s\t%s\n' "$QUEUED_LOG" "$*" >>"$JOBS"
}

run_queue() {
    [[ -s "$JOBS" ]] || return 0
    LOGN=$((LOGN + 1))
    # TensorFlow's C++ start-up lines go to the process's own stderr, into this log.
    if ! "$PY" "$HERE/tf_batch.py" "$JOBS" >"$TMP/log.$LOGN" 2>&1; then
        echo "tf_batch.py failed: the checks it did not finish fail below"
        show_log "$TMP/log.$LOGN"
    fi
    : >"$JOBS"
}

queued() {
    local label="$1" log="$2"
    if [[ "$(cat "$log.rc" 2>/dev/null)" == 0 ]]; then
        PASS=$((PASS + 1))
        return 0
    fi
    FAIL=$((FAIL + 1))
    FAILED+=("$label")
    echo "FAIL $label"
    show_log "$log"
    return 1
}

# TF -> sluice for one file: `sluice cat` must print what MessageToJson of TF's read gives.
tf_file_check() {
    local f="$1" tfjson="$2" count="$3"
    "$SLUICE" cat "$f" >"$f.sluice.jsonl" || { echo "sluice cat $f failed (exit $?)"; return 1; }
    [[ -f "$tfjson" ]] || { echo "no TF JSONL for $f (tf_to_jsonl.py failed)"; return 1; }
    "$PY" "$HERE/jsonl_compare.py" "$f.sluice.jsonl" "$tfjson" --count "$count" --label "$f"
}

count_lines() { cat "$@" 2>/dev/null | wc -l | tr -d ' '; }

# ---------------------------------------------------------------- 1. sluice -> TF
section "sluice writes, TensorFlow reads (tf.data + MessageToJson + tf.io parser; real schema)"
declare -A RECORDS=([tabular]=3000 [image]=300 [jpeg]=100)
declare -A SHARDS=([tabular]=3 [image]=2 [jpeg]=2)
declare -A EXT=([none]=".tfrecord" [gzip]=".tfrecord.gz" [zlib]=".tfrecord.zlib")
# Each dataset is written and `sluice cat` of each file taken first, the TensorFlow checks
# queued (one per file, one for the schema), then run together and counted per dataset.
DATASETS=() FILE_JOBS=()
declare -A DS_FILES=() DS_SCHEMA_LOG=()
for kind in tabular image jpeg; do
    n="${RECORDS[$kind]}"
    k="${SHARDS[$kind]}"
    for comp in none gzip zlib; do
        name="$kind/$comp"
        dir="$TMP/sluice/$kind-$comp"
        LOGN=$((LOGN + 1))
        if ! "$SLUICE" gen "$kind" --records "$n" --shards "$k" --out "$dir" --seed "$SEED" \
            --compression "$comp" >"$TMP/log.$LOGN" 2>&1; then
            fail "sluice->tf $name: sluice gen" "exit status non-zero"
            show_log "$TMP/log.$LOGN"
            continue
        fi
        files=()
        missing=0
        for ((s = 0; s < k; s++)); do
            f="$dir/$(printf '%s-%05d-of-%05d%s' "$kind" "$s" "$k" "${EXT[$comp]}")"
            if [[ -f "$f" ]]; then
                files+=("$f")
            else
                fail "sluice->tf $name: $(basename "$f")" "sluice gen did not write it"
                missing=1
            fi
        done
        others=$(find "$dir" -type f | wc -l | tr -d ' ')
        if [[ "$others" != "${#files[@]}" ]]; then
            fail "sluice->tf $name: files" "sluice gen wrote $others files, expected $k: $(ls "$dir" | tr '\n' ' ')"
        fi
        DATASETS+=("$name")
        DS_FILES[$name]="${files[*]}"
        for f in "${files[@]}"; do
            if "$SLUICE" cat "$f" >"$f.jsonl" 2>"$f.cat.log"; then
                queue "$HERE/tf_check.py" "$f" --expect "$f.jsonl"
                FILE_JOBS+=("$name"$'\t'"sluice->tf $name: $(basename "$f")"$'\t'"$QUEUED_LOG")
            else
                fail "sluice->tf $name: $(basename "$f")" "sluice cat failed"
                show_log "$f.cat.log"
            fi
        done
        DS_SCHEMA_LOG[$name]=""
        if [[ $missing == 0 ]]; then
            queue "$HERE/tf_schema_check.py" --kind "$kind" --records "$n" "${files[@]}"
            DS_SCHEMA_LOG[$name]="$QUEUED_LOG"
        fi
    done
done
run_queue
for name in "${DATASETS[@]}"; do
    read -r -a files <<<"${DS_FILES[$name]}"
    ok=0
    for job in "${FILE_JOBS[@]}"; do
        IFS=$'\t' read -r ds label log <<<"$job"
        if [[ "$ds" == "$name" ]] && queued "$label" "$log"; then
            ok=$((ok + 1))
        fi
    done
    schema="FAILED"
    if [[ -n "${DS_SCHEMA_LOG[$name]}" ]] && queued "sluice->tf $name: schema" "${DS_SCHEMA_LOG[$name]}"; then
        schema="ok"
    fi
    printf 'sluice->tf  %-13s %d files %5d records: TF read == sluice cat %d/%d files; schema %s\n' \
        "$name" "${#files[@]}" "$(count_lines "${files[@]/%/.jsonl}")" "$ok" "${#files[@]}" "$schema"
done

# ---------------------------------------------------------------- 2. TF -> sluice
MAKE_DATA="$ROOT/bench/make_data.py"
section "TensorFlow writes (bench/make_data.py), sluice reads (sluice cat == MessageToJson of TF's read)"
if [[ ! -f "$MAKE_DATA" ]]; then
    fail "tf->sluice" "$MAKE_DATA not found (the TensorFlow data writer is part of the repository)"
else
    DATA="$TMP/tfdata"
    LOGN=$((LOGN + 1))
    if ! "$PY" "$MAKE_DATA" --scale 0.001 --out "$DATA" --jobs 2 >"$TMP/log.$LOGN" 2>&1; then
        fail "tf->sluice: make_data.py" "TensorFlow failed to write the datasets"
        show_log "$TMP/log.$LOGN"
    else
        # "dataset/file records" per shard and "dataset records" per dataset, from the manifest
        declare -A FILE_RECORDS=() DS_RECORDS=()
        while read -r key recs; do
            if [[ "$key" == */* ]]; then FILE_RECORDS["$key"]="$recs"; else DS_RECORDS["$key"]="$recs"; fi
        done < <("$PY" - "$DATA/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
for name, d in m["datasets"].items():
    print(name, d["records"])
    for f in d["files"]:
        print(f["file"], f["records"])
EOF
        )
        declare -A TF_KIND=([tabular]=tabular [tabular_gzip]=tabular [image_raw]=image [jpeg]=jpeg)
        for ds in tabular tabular_gzip image_raw jpeg; do
            if [[ -z "${DS_RECORDS[$ds]:-}" ]]; then
                fail "tf->sluice $ds" "not in make_data's manifest"
                continue
            fi
            shopt -s nullglob
            files=("$DATA/$ds"/*.tfrecord*)
            shopt -u nullglob
            if [[ ${#files[@]} == 0 ]]; then
                fail "tf->sluice $ds" "make_data.py wrote no files"
                continue
            fi
            out="$TMP/tfjson/$ds"
            mkdir -p "$out"
            LOGN=$((LOGN + 1))
            if ! "$PY" "$HERE/tf_to_jsonl.py" --out-dir "$out" "${files[@]}" >"$TMP/log.$LOGN" 2>&1; then
                echo "tf_to_jsonl.py failed on $ds (the affected files fail below):"
                show_log "$TMP/log.$LOGN"
            fi
            ok=0
            for f in "${files[@]}"; do
                rel="$ds/$(basename "$f")"
                recs="${FILE_RECORDS[$rel]:-}"
                if [[ -z "$recs" ]]; then
                    fail "tf->sluice $rel" "not in make_data's manifest"
                    continue
                fi
                if check "tf->sluice $rel" tf_file_check "$f" "$out/$(basename "$f").jsonl" "$recs"; then
                    ok=$((ok + 1))
                fi
            done
            schema="FAILED"
            if check "tf->sluice $ds: schema" "$PY" "$HERE/tf_schema_check.py" \
                --kind "${TF_KIND[$ds]}" --records "${DS_RECORDS[$ds]}" "${files[@]}"; then
                schema="ok"
            fi
            printf 'tf->sluice  %-13s %d files %5d records: sluice cat == TF MessageToJson %d/%d files; schema %s\n' \
                "$ds" "${#files[@]}" "$(count_lines "${files[@]/%/.sluice.jsonl}")" "$ok" "${#files[@]}" "$schema"
        done
    fi
fi

# ---------------------------------------------------------------- 3. pipelines
# Sluice's benchmark pipelines (`sluice bench pipeline`) compute what tf.data's peer
# pipelines (bench/tfdata_bench.py's build()) compute: first batch, one shard.
PEER="$ROOT/bench/tfdata_bench.py"
section "sluice bench pipelines vs tf.data's peer pipelines (first batch, one shard)"
if [[ ! -f "$PEER" ]]; then
    fail "pipelines" "$PEER not found (the tf.data peer benchmark is part of the repository)"
else
    pipeline_check() {
        local name="$1" dir="$2"
        "$SLUICE" bench pipeline "$name" "$dir" --warmup 0 --dump "$TMP/$name.bin" >/dev/null || return 1
        "$PY" "$HERE/pipeline_check.py" --peer "$PEER" --pipeline "$name" --data "$dir" --dump "$TMP/$name.bin"
    }
    for spec in "parse_tabular tabular 1024" "image_raw image 256" "jpeg jpeg 128"; do
        read -r name kind n <<<"$spec"
        dir="$TMP/pipe-$kind"
        "$SLUICE" gen "$kind" --records "$n" --shards 1 --out "$dir" >/dev/null 2>&1
        if check "pipeline $name" pipeline_check "$name" "$dir"; then
            grep "^$name:" "$TMP/log.$LOGN" || true
        fi
    done
fi

# ---------------------------------------------------------------- 4. ported programs
# tf.data programs and their `.pipe` ports (tests/pipes) yield the same elements,
# compared through `sluice show -n all`.
section "tf.data programs vs their .pipe ports (sluice show)"
PROGRAMS=(range range_batch parse_tensor interleave_auto text_lines csv jpeg_folder ignore_errors zip
    concatenate enumerate take_while tokenize_pack bucket_by_length window sequence_example flat_map)
declare -A SHOW_LOG=()
for program in "${PROGRAMS[@]}"; do
    queue "$HERE/show_check.py" --sluice "$SLUICE" --root "$ROOT" --work "$TMP/show-$program" --program "$program"
    SHOW_LOG[$program]="$QUEUED_LOG"
done
run_queue
for program in "${PROGRAMS[@]}"; do
    if queued "show $program" "${SHOW_LOG[$program]}"; then
        tail -n 1 "${SHOW_LOG[$program]}"
    fi
done

# sluice run --output -> TF: the exported tf.train.Example shards read back with
# tf.data.TFRecordDataset + tf.io.parse_single_example equal `sluice show -n all`.
section "sluice run --output shards read by TensorFlow"
if check "export" "$PY" "$HERE/export_check.py" --sluice "$SLUICE" --work "$TMP/export"; then
    tail -n 1 "$TMP/log.$LOGN"
fi

# Parquet written by pyarrow (each compression and encoding), `datasets` and polars, read
# by both backends equal to pyarrow's own reading.
section "Parquet from pyarrow, datasets and polars (parquet(files))"
if check "parquet" "$PY" "$HERE/parquet_check.py" --sluice "$SLUICE" --work "$TMP/parquet"; then
    tail -n 1 "$TMP/log.$LOGN"
fi

# WebDataset shards written by the webdataset package's TarWriter, read by both backends
# equal to webdataset.WebDataset's samples.
section "WebDataset shards from webdataset.TarWriter (webdataset(files))"
if check "webdataset" "$PY" "$HERE/webdataset_check.py" --sluice "$SLUICE" --work "$TMP/webdataset"; then
    tail -n 1 "$TMP/log.$LOGN"
fi

# sluice run --output --format parquet|webdataset, read back by pyarrow and by
# webdataset.WebDataset equal to `sluice show -n all`.
section "sluice run --output --format parquet|webdataset read by pyarrow and webdataset"
if check "output" "$PY" "$HERE/output_check.py" --sluice "$SLUICE" --work "$TMP/output"; then
    tail -n 1 "$TMP/log.$LOGN"
fi

# ---------------------------------------------------------------- summary
if [[ $FAIL -gt 0 ]]; then
    echo "failed checks:"
    printf '  %s\n' "${FAILED[@]}"
fi
echo "interop: TensorFlow $TF_VERSION, $((SECONDS - START)) s"
echo "interop: $PASS passed, $FAIL failed"
[[ $FAIL == 0 ]]
