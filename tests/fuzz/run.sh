#!/bin/bash
# Runs each fuzz target (built by `make fuzz` into build-fuzz/fuzz/) for
# SECONDS of wall time, at low priority:
#   tests/fuzz/run.sh SECONDS [TARGET...]       (default: every target)
#   tests/fuzz/run.sh --smoke SECONDS [TARGET...]
# --smoke (make fuzz-smoke, tests/fuzz-smoke.sh in make check): each target
# from a fresh corpus of the seeds and the regression inputs only, as many
# at a time as there are cores, findings in build-fuzz/smoke-findings/;
# exit 1 on any finding.  The smoke run uses a fixed seed (FUZZ_SEED,
# default 1) so that CI walks the same paths each time; long runs are random.
# FUZZ_CPU_SECONDS=N stops a target (SIGTERM: libFuzzer prints its final
# stats) once it has used N seconds of CPU, whichever comes first: on a
# busy shared machine a wall-clock budget says little about the work done.
# The CPU seconds each run used are appended to build-fuzz/cpu.log.
# FUZZ_FLAGS adds libFuzzer options, e.g. "-fork=1 -ignore_crashes=1
# -ignore_timeouts=1 -ignore_ooms=1" to go on past known findings (their
# inputs are still written to build-fuzz/findings/<target>/).
# Corpora grow in build-fuzz/corpus/<target>/ (first filled by make-seeds.sh
# and with the regression inputs of tests/corpus/fuzz/<target>/); crashes,
# timeouts and OOMs land in build-fuzz/findings/<target>/.  Copy each one
# into tests/corpus/fuzz/<target>/ once it is fixed, so make check replays
# it.  Exit 1 when a target found something.
set -u
smoke=0
[ "${1:-}" = --smoke ] && { smoke=1; shift; }
secs=${1:?usage: run.sh [--smoke] SECONDS [TARGET...]}
shift
top=${FUZZ_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=$top/build-fuzz/fuzz
cd "$top"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for t in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$t" .c)"); done
fi
# the seeds, made again when their generators change
stamp=$(cat tests/fuzz/make-seeds.sh tests/fuzz/make-vmdk-seeds.py tests/fuzz/make-qcow2-damaged.py \
            tests/tools/vhdmake.py tests/tools/vdimake.py tests/fuzz/cut-seeds.py \
            tests/tools/vhdxmake.py |
        sha1sum | cut -c1-16)
if [ "$(cat build-fuzz/seeds/.stamp 2>/dev/null)" != "$stamp" ]; then
    make --no-print-directory -s build/tools/genimg >/dev/null
    mkdir -p build-fuzz
    rm -rf build-fuzz/seeds.tmp
    tests/fuzz/make-seeds.sh build-fuzz/seeds.tmp >/dev/null || exit 2
    echo "$stamp" > build-fuzz/seeds.tmp/.stamp
    rm -rf build-fuzz/seeds
    mv build-fuzz/seeds.tmp build-fuzz/seeds
fi

# dictionary of a target: its own, else the one of its family
# (fuzz_qcow2_inplace, fuzz_qcow2_repair, fuzz_qcow2_resize and fuzz_qcow2_snapshot use
# fuzz_qcow2.dict)
dict_of() {
    local t=$1
    while [ -n "$t" ]; do
        [ -f "tests/fuzz/$t.dict" ] && { echo "tests/fuzz/$t.dict"; return; }
        [[ $t == *_* ]] || return
        t=${t%_*}
    done
}
# qcow2 seeds of 128 KiB to 2 MiB clusters are up to 14 MiB long; a VHDX
# is at least 3 MiB (its regions are 1 MiB apart)
# libFuzzer keeps its corpus in memory: a VHDX corpus (inputs of 3-12 MiB)
# needs more room than the usual limit
rss_of() {
    case $1 in
    fuzz_vhdx) echo 2048 ;;
    *) echo "$2" ;;
    esac
}
max_len_of() {
    case $1 in
    fuzz_qcow2) echo "${FUZZ_MAX_LEN:-16777216}" ;;
    fuzz_vhdx) echo "${FUZZ_MAX_LEN:-12582912}" ;;
    *) echo "${FUZZ_MAX_LEN:-524288}" ;;
    esac
}

if [ $smoke = 1 ]; then
    out=build-fuzz/smoke
    rm -rf "$out" build-fuzz/smoke-findings
    mkdir -p "$out" build-fuzz/smoke-findings
    for t in "${targets[@]}"; do
        [ -x "$bin/$t" ] || { echo "run.sh: $bin/$t not built (make fuzz-smoke)" >&2; exit 2; }
    done
    smoke_one() {
        local t=$1 d rc
        d=$(dict_of "$t")
        mkdir -p "$out/$t" "build-fuzz/smoke-findings/$t"
        local seeds=()
        for s in build-fuzz/seeds/$t tests/corpus/fuzz/$t; do [ -d "$s" ] && seeds+=("$s"); done
        "$bin/$t" -seed="${FUZZ_SEED:-1}" -max_total_time="$secs" -rss_limit_mb="$(rss_of "$t" 1024)" -timeout=20 \
            -max_len="$(max_len_of "$t")" -print_final_stats=1 \
            -artifact_prefix="build-fuzz/smoke-findings/$t/" ${d:+-dict="$d"} \
            "$out/$t" "${seeds[@]}" > "build-fuzz/smoke-$t.log" 2>&1
        rc=$?
        local runs; runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "build-fuzz/smoke-$t.log" | grep -o '[0-9]*$')
        if [ $rc -ne 0 ] || [ -n "$(ls -A "build-fuzz/smoke-findings/$t")" ]; then
            echo "FOUND $t (exit $rc, ${runs:-?} runs): build-fuzz/smoke-$t.log, build-fuzz/smoke-findings/$t/"
            grep -E 'ERROR|SUMMARY|fuzz:|Test unit written' "build-fuzz/smoke-$t.log" | head -n 5
            return 1
        fi
        echo "ok $t: ${runs:-?} runs in ${secs}s"
    }
    export -f smoke_one dict_of max_len_of rss_of
    export bin out secs
    jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
    printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'smoke_one {}' > "$out/results"
    rc=$?
    cat "$out/results"
    [ $rc -eq 0 ] && ! grep -q '^FOUND' "$out/results"
    exit $?
fi

found=0
for t in "${targets[@]}"; do
    [ -x "$bin/$t" ] || { echo "run.sh: $bin/$t not built (make fuzz)" >&2; exit 2; }
    corpus=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
    mkdir -p "$corpus" "$findings"
    dict=()
    d=$(dict_of "$t")
    [ -n "$d" ] && dict=(-dict="$d")
    seeds=()
    for s in build-fuzz/seeds/$t tests/corpus/fuzz/$t; do [ -d "$s" ] && seeds+=("$s"); done
    echo "== $t: ${secs}s"
    before=$(find "$findings" -type f | wc -l)
    nice -n 10 "$bin/$t" -max_total_time="$secs" -rss_limit_mb="$(rss_of "$t" 512)" -timeout=10 \
        -max_len="$(max_len_of "$t")" -print_final_stats=1 \
        -artifact_prefix="$findings/" "${dict[@]}" ${FUZZ_FLAGS:-} "$corpus" "${seeds[@]}" \
        > "build-fuzz/$t.log" 2>&1 &
    pid=$!
    tck=$(getconf CLK_TCK)
    cpu=0
    while kill -0 $pid 2>/dev/null; do
        # utime + stime of the fuzzer and of its finished children (-fork)
        if read -r -a st < /proc/$pid/stat 2>/dev/null; then
            cpu=$(( (st[13] + st[14] + st[15] + st[16]) / tck ))
            if [ -n "${FUZZ_CPU_SECONDS:-}" ] && [ $cpu -ge "$FUZZ_CPU_SECONDS" ]; then
                # TERM, not INT: a background job of a script starts with
                # SIGINT ignored, and libFuzzer then leaves it ignored
                kill -TERM $pid
                break
            fi
        fi
        sleep 5
    done
    wait $pid
    rc=$?
    [ $rc = 130 ] || [ $rc = 143 ] || [ $rc = 72 ] && rc=0   # stopped by the CPU budget
    echo "$(date -u +%FT%TZ) $t cpu_seconds=$cpu exit=$rc" >> build-fuzz/cpu.log
    tail -n 12 "build-fuzz/$t.log" | grep -E '^stat::|Done|ERROR|SUMMARY' || true
    # with -fork=1 the parent runs nothing itself: its last status line
    # ("#EXECS: cov: EDGES ft: FEATURES corp: N ...") has the totals
    grep -E '^#[0-9]+: cov:' "build-fuzz/$t.log" | tail -n 1
    after=$(find "$findings" -type f | wc -l)
    if [ $rc -ne 0 ] || [ "$after" -gt "$before" ]; then
        echo "== $t: FOUND something (exit $rc): see build-fuzz/$t.log and $findings/"
        found=1
    fi
done
exit $found
