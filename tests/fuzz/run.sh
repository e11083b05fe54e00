#!/bin/bash
# Runs each fuzz target (built by `make fuzz` into build-fuzz/fuzz/) for
# SECONDS of wall time, at low priority:
#   tests/fuzz/run.sh SECONDS [TARGET...]       (default: every target)
# FUZZ_CPU_SECONDS=N stops a target (SIGINT: libFuzzer prints its final
# stats) once it has used N seconds of CPU, whichever comes first: on a
# busy shared machine a wall-clock budget says little about the work done.
# The CPU seconds each run used are appended to build-fuzz/cpu.log.
# Corpora grow in build-fuzz/corpus/<target>/ (first filled by make-seeds.sh
# and with the regression inputs of tests/corpus/fuzz/<target>/); crashes,
# timeouts and OOMs land in build-fuzz/findings/<target>/.  Copy each one
# into tests/corpus/fuzz/<target>/ once it is fixed, so make check replays
# it.  Exit 1 when a target found something.
set -u
secs=${1:?usage: run.sh SECONDS [TARGET...]}
shift
top=${FUZZ_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=$top/build-fuzz/fuzz
cd "$top"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for t in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$t" .c)"); done
fi
if [ ! -d build-fuzz/seeds ]; then
    make --no-print-directory -s build/tools/genimg >/dev/null
    tests/fuzz/make-seeds.sh build-fuzz/seeds.tmp && mv build-fuzz/seeds.tmp build-fuzz/seeds
fi
found=0
for t in "${targets[@]}"; do
    [ -x "$bin/$t" ] || { echo "run.sh: $bin/$t not built (make fuzz)" >&2; exit 2; }
    corpus=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
    mkdir -p "$corpus" "$findings"
    dict=()
    [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
    seeds=()
    for s in build-fuzz/seeds/$t tests/corpus/fuzz/$t; do [ -d "$s" ] && seeds+=("$s"); done
    echo "== $t: ${secs}s"
    before=$(find "$findings" -type f | wc -l)
    nice -n 10 "$bin/$t" -max_total_time="$secs" -rss_limit_mb=512 -timeout=10 \
        -max_len=${FUZZ_MAX_LEN:-524288} -print_final_stats=1 \
        -artifact_prefix="$findings/" "${dict[@]}" "$corpus" "${seeds[@]}" \
        > "build-fuzz/$t.log" 2>&1 &
    pid=$!
    tck=$(getconf CLK_TCK)
    cpu=0
    while kill -0 $pid 2>/dev/null; do
        # utime + stime of the fuzzer, in seconds
        if read -r -a st < /proc/$pid/stat 2>/dev/null; then
            cpu=$(( (st[13] + st[14]) / tck ))
            if [ -n "${FUZZ_CPU_SECONDS:-}" ] && [ $cpu -ge "$FUZZ_CPU_SECONDS" ]; then
                kill -INT $pid
                break
            fi
        fi
        sleep 5
    done
    wait $pid
    rc=$?
    [ $rc = 130 ] || [ $rc = 72 ] && rc=0   # stopped by the CPU budget (SIGINT)
    echo "$(date -u +%FT%TZ) $t cpu_seconds=$cpu exit=$rc" >> build-fuzz/cpu.log
    tail -n 12 "build-fuzz/$t.log" | grep -E '^stat::|Done|ERROR|SUMMARY' || true
    after=$(find "$findings" -type f | wc -l)
    if [ $rc -ne 0 ] || [ "$after" -gt "$before" ]; then
        echo "== $t: FOUND something (exit $rc): see build-fuzz/$t.log and $findings/"
        found=1
    fi
done
exit $found
