#!/bin/bash
# The write queue's backends inside the real pipeline: `diskimg convert`
# raw -> raw of the seeded bench disk (warm cache), with DISKIMG_IOQ forcing
# each backend, runs alternating (order rotated every round); prints medians
# of wall time and of the process's user+sys CPU (io-wq workers and the
# writer thread included).
#   bench/ioq_convert.sh [CACHE_MODE...]      (default: unsafe none)
# unsafe = buffered, no fsync; none = O_DIRECT; writeback = buffered + fsync.
# BENCH_SIZE (default 4G), BENCH_RUNS (default 5), BENCH_DIR (default bench/out).
# BENCH_RT=1 runs each conversion at real-time priority (chrt -f 1, root):
# on a machine shared with other busy users that is the only way to see
# what an idle machine would do (CFS gives a process with more threads a
# larger share, which flatters the backends that add a thread).
. "$(dirname "$0")/lib.sh"
size=${BENCH_SIZE:-4G}
disk=$(bench_disk "$size")
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(unsafe none)
backends=(pwrite uring thread)
rt=; [ "${BENCH_RT:-0}" = 1 ] && rt="chrt -f 1"
warm "$disk"
echo "disk $disk ($(du -h "$disk" | cut -f1) allocated of $size), $RUNS alternating runs"
printf '%-10s %-8s %8s %8s\n' "cache" "backend" "wall s" "cpu s"
for mode in "${modes[@]}"; do
    declare -A walls=() cpus=()
    for i in $(seq 1 "$RUNS"); do
        # rotate the order every round so that no backend always follows
        # the same one
        for k in 0 1 2; do
            b=${backends[$(( (i + k) % 3 ))]}
            out=$OUT/ioq-$b.raw
            rm -f "$out"
            sync
            DISKIMG_IOQ=$b /usr/bin/time -o "$OUT/ioq-time" -f '%e %U %S' $rt "$D" convert \
                -t "$mode" -f raw -O raw "$disk" "$out" >/dev/null 2>"$OUT/ioq-err" ||
                { cat "$OUT/ioq-err" >&2; echo "FAILED: $b -t $mode" >&2; }
            t=$(tail -n 1 "$OUT/ioq-time")
            rm -f "$out"
            walls[$b]="${walls[$b]:-} $(echo "$t" | awk '{print $1}')"
            cpus[$b]="${cpus[$b]:-} $(echo "$t" | awk '{print $2 + $3}')"
        done
    done
    for b in "${backends[@]}"; do
        printf '%-10s %-8s %8s %8s   (walls:%s)\n' "$mode" "$b" \
            "$(echo ${walls[$b]} | tr ' ' '\n' | median)" \
            "$(echo ${cpus[$b]} | tr ' ' '\n' | median)" "${walls[$b]}"
    done
    unset walls cpus
done
