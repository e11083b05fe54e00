#!/bin/bash
# diskimg compare against qemu-img compare on the seeded bench disk and
# copies of it, alternating the two tools run by run; prints the medians of
# wall time and of CPU time (user+sys) and the medians of the pairwise
# ratios diskimg/qemu-img (below 1: diskimg faster).  On a busy machine the
# CPU ratio is the steadier number; the wall ratio shows the parallel reads.
#   identical copy   cp made the written zero runs holes: same content,
#                    other allocation (zero against data ranges)
#   last byte        the same copy with its last byte changed: a full scan
#                    that ends in a mismatch
#   itself           the disk against itself: data against data everywhere
# BENCH_SIZE (default 4G), BENCH_RUNS (default 5), BENCH_DIR (default bench/out).
. "$(dirname "$0")/lib.sh"
size=${BENCH_SIZE:-4G}
disk=$(bench_disk "$size")
copy=$OUT/compare-copy-$size.raw
[ -f "$copy" ] || cp --sparse=always "$disk" "$copy"
last=$OUT/compare-last-$size.raw
if [ ! -f "$last" ]; then
    cp --sparse=always "$disk" "$last"
    printf '\377' | dd of="$last" bs=1 seek=$(( $(stat -c %s "$disk") - 1 )) conv=notrunc status=none
fi
echo "compare: $disk ($(du -h "$disk" | cut -f1) allocated) vs copies ($(du -h "$copy" | cut -f1)); $RUNS alternating runs"
echo "columns: wall diskimg/qemu-img medians, CPU diskimg/qemu-img medians, median ratios wall and CPU"
warm "$disk" "$copy" "$last"

# run_timed CMD...: prints "WALL CPU" (CPU = user + sys of the command)
run_timed() {
    local s e cpu
    s=$(now)
    /usr/bin/time -o "$OUT/time.out" -f "%U %S" "$@" > /dev/null 2>&1
    e=$(now)
    cpu=$(tail -n 1 "$OUT/time.out" | awk '{print $1 + $2}')
    awk "BEGIN{printf \"%.3f %.3f\", $e - $s, $cpu}"
}

compare_ab() {
    local name=$1 b=$2 i wa ca wq cq rw="" rc="" was="" cas="" wqs="" cqs=""
    for i in $(seq 1 "$RUNS"); do
        read -r wa ca < <(run_timed "$D" compare -q "$disk" "$b")
        read -r wq cq < <(run_timed qemu-img compare -q "$disk" "$b")
        was="$was $wa"; cas="$cas $ca"; wqs="$wqs $wq"; cqs="$cqs $cq"
        rw="$rw $(awk "BEGIN{printf \"%.3f\", $wa / $wq}")"
        rc="$rc $(awk "BEGIN{printf \"%.3f\", $ca / ($cq > 0 ? $cq : 0.001)}")"
    done
    printf '%-24s wall %6.3f/%6.3f s  cpu %6.3f/%6.3f s  ratio wall %4.2f cpu %4.2f\n' "$name" \
        "$(echo $was | tr ' ' '\n' | median)" "$(echo $wqs | tr ' ' '\n' | median)" \
        "$(echo $cas | tr ' ' '\n' | median)" "$(echo $cqs | tr ' ' '\n' | median)" \
        "$(echo $rw | tr ' ' '\n' | median)" "$(echo $rc | tr ' ' '\n' | median)"
}

[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (GNU time)"; exit 1; }
compare_ab "identical copy" "$copy"
compare_ab "last byte differs" "$last"
compare_ab "itself" "$disk"
