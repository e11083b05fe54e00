#!/bin/bash
# Runs every test: unit binaries in $BUILD/tests, then tests/*.sh; then the
# same again against the AddressSanitizer+UBSan build in build-asan/ (unless
# DISKIMG_NO_ASAN=1).  A test passes with exit 0, is skipped with exit 77.
# Usage: tests/run.sh [-j N] [NAME-PATTERN...]
# The longest tests start first (wall times of the last run, kept in
# build/test-times; tests/test-times, the long ones on a quiet 2-core
# machine, when there is none), so that no long test is left to run alone
# at the end.  Each result line gives the test's
# wall and CPU seconds (user+sys of everything it ran).
# The last line is always "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
# one job more than cores: many tests wait on fsync and on qemu-img's I/O
# (at one job a core the suite kept the cores 82% busy)
jobs=$(( $(nproc 2>/dev/null || echo 2) + 1 ))
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
patterns=("$@")
out=$top/tests/out
rm -rf "$out"; mkdir -p "$out"
export LC_ALL=C

want() {
    [ ${#patterns[@]} -eq 0 ] && return 0
    local p; for p in "${patterns[@]}"; do [[ $1 == *$p* ]] && return 0; done
    return 1
}

# one line per test: "<variant> <kind> <path>"
list=()
variants=(build)
[ "${DISKIMG_NO_ASAN:-0}" != 1 ] && [ -x build-asan/diskimg ] && variants+=(build-asan)
for v in "${variants[@]}"; do
    for t in "$v"/tests/test_*; do
        [ -x "$t" ] || continue
        want "$(basename "$t")" && list+=("$v unit $t")
    done
    for t in tests/*.sh; do
        [ -f "$t" ] || continue
        case $t in tests/lib.sh|tests/run.sh) continue ;; esac
        if [ "$v" = build-asan ] && grep -q '^# asan: skip' "$t"; then continue; fi
        want "$(basename "$t")" && list+=("$v sh $t")
    done
done

# longest first: "seconds variant kind path", sorted, then the seconds cut
times_file=$top/build/test-times
estimate() {
    local f
    for f in "$times_file" "$top/tests/test-times"; do
        [ -f "$f" ] && cat "$f" && return
    done
}
declare -A est=()
while read -r secs name; do
    [ -n "$name" ] && est[$name]=$secs
done < <(estimate)
sorted=()
while read -r _ line; do sorted+=("$line"); done < <(
    for l in "${list[@]}"; do
        read -r v _ t <<<"$l"
        # a test never timed gets 10 s: early enough not to end the run alone
        echo "${est[$v/$(basename "$t")]:-10} $l"
    done | sort -s -k1,1 -g -r)
list=("${sorted[@]}")

run_one() {
    local v=$1 kind=$2 t=$3 name dir rc start cpu
    name="$v/$(basename "$t")"
    dir=$out/$v/$(basename "$t" .sh)
    mkdir -p "$dir"
    start=$(date +%s.%N)
    if [ "$kind" = unit ]; then
        (cd "$dir" && TEST_TMP=$dir timeout 600 "$top/$t") >"$dir/log" 2>&1
    else
        DISKIMG=$top/$v/diskimg BUILD=$top/$v TOP=$top TEST_TMP=$dir \
            ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
            timeout 600 bash "$top/$t" >"$dir/log" 2>&1
    fi
    rc=$?
    local secs; secs=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
    # `times`' second line: user and system time of this shell's children
    # (into a file: in a pipe or $(...) it would run in a subshell)
    times > "$dir/times"
    cpu=$(awk 'NR == 2 {
        split($1, u, /m|s/); split($2, s, /m|s/); printf "%.1f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$dir/times")
    rm -f "$dir/times"
    echo "$secs $name" >> "$out/times"
    case $rc in
        0) echo "PASS $name (${secs}s, cpu ${cpu}s)" ;;
        77) echo "SKIP $name: $(tail -n 1 "$dir/log")" ;;
        *) echo "FAIL $name (exit $rc, ${secs}s, cpu ${cpu}s)"; sed 's/^/    /' "$dir/log" | tail -n 30 ;;
    esac
    # large scratch files go, logs stay
    find "$dir" -type f ! -name log -size +1M -delete 2>/dev/null
    return 0
}
export -f run_one
export out top

t0=$(date +%s)
[ ${#list[@]} -gt 0 ] &&
    printf '%s\n' "${list[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' > "$out/results" 2>&1
touch "$out/results" "$out/times"
cat "$out/results"
# this run's times replace the old ones of the same tests
if [ -d "$top/build" ]; then
    { [ -f "$times_file" ] && grep -vFf <(awk '{print " " $2}' "$out/times") "$times_file"
      cat "$out/times"; } | sort -k2 > "$times_file.new" 2>/dev/null &&
        mv "$times_file.new" "$times_file"
fi
cpu_total=$(grep -Eo 'cpu [0-9.]+s' "$out/results" | awk '{s += $2} END {printf "%.0f", s}')
echo "wall $(( $(date +%s) - t0 ))s, cpu ${cpu_total}s in the tests, $jobs at a time"
passed=$(grep -c '^PASS' "$out/results")
failed=$(grep -c '^FAIL' "$out/results")
skipped=$(grep -c '^SKIP' "$out/results")
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
