#!/bin/bash
# Runs every test: unit binaries in $BUILD/tests, then tests/*.sh; then the
# same again against the AddressSanitizer+UBSan build in build-asan/ (unless
# DISKIMG_NO_ASAN=1).  A test passes with exit 0, is skipped with exit 77.
# Usage: tests/run.sh [-j N] [NAME-PATTERN...]
# The last line is always "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)
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

run_one() {
    local v=$1 kind=$2 t=$3 name dir rc start
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
    case $rc in
        0) echo "PASS $name (${secs}s)" ;;
        77) echo "SKIP $name: $(tail -n 1 "$dir/log")" ;;
        *) echo "FAIL $name (exit $rc, ${secs}s)"; sed 's/^/    /' "$dir/log" | tail -n 30 ;;
    esac
    # large scratch files go, logs stay
    find "$dir" -type f ! -name log -size +1M -delete 2>/dev/null
    return 0
}
export -f run_one
export out top

printf '%s\n' "${list[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' > "$out/results" 2>&1
cat "$out/results"
passed=$(grep -c '^PASS' "$out/results")
failed=$(grep -c '^FAIL' "$out/results")
skipped=$(grep -c '^SKIP' "$out/results")
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
