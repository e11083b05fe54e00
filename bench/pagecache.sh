#!/bin/bash
# How much dirty page cache a conversion builds up.  Converts a 20 GiB
# seeded raw disk (about 30% written) to raw with diskimg's default
# (durable: write-behind keeps at most a window of dirty data), with
# `-t unsafe`, with `-t none` (O_DIRECT) and with qemu-img's default, and
# samples Dirty + Writeback from /proc/meminfo every 50 ms.  Prints the
# peak above the level before the run, and the wall time.
# Not a speed comparison: the runs are not alternated.
# BENCH_PC_SIZE (default 20G), BENCH_DIR (default bench/out).
. "$(dirname "$0")/lib.sh"
size=${BENCH_PC_SIZE:-20G}
disk=$OUT/pagecache-$size.raw
[ -f "$disk" ] || "$TOP/build/tools/genimg" -s 7 -a 30 "$size" "$disk" >&2
sync

dirty_kib() { awk '/^(Dirty|Writeback):/ {s += $2} END {print s}' /proc/meminfo; }

# peak NAME CMD... (@OUT@ is replaced by a fresh output name)
peak() {
    local name=$1; shift
    local out=$OUT/pc-out.raw cmd=("${@//@OUT@/$OUT/pc-out.raw}")
    rm -f "$out"; sync
    local base max cur s e
    base=$(dirty_kib); max=$base
    s=$(now)
    "${cmd[@]}" >/dev/null 2>"$OUT/last.err" &
    local pid=$!
    while kill -0 $pid 2>/dev/null; do
        cur=$(dirty_kib)
        [ "$cur" -gt "$max" ] && max=$cur
        sleep 0.05
    done
    wait $pid || { cat "$OUT/last.err" >&2; echo "FAILED: ${cmd[*]}" >&2; }
    e=$(now)
    printf '%-34s peak dirty+writeback %6d MiB   %6.1f s\n' "$name" \
        $(((max - base) / 1024)) "$(awk "BEGIN{print $e - $s}")"
    rm -f "$out"; sync
}

echo "page cache: $disk ($(du -h "$disk" | cut -f1) allocated of $size); machine RAM $(awk '/MemTotal/ {printf "%d MiB", $2/1024}' /proc/meminfo)"
echo "dirty limits: $(sysctl -n vm.dirty_background_ratio)% background, $(sysctl -n vm.dirty_ratio)% blocking (of available memory)"
peak "diskimg convert (default)" "$D" convert -O raw "$disk" @OUT@
peak "diskimg convert -t unsafe" "$D" convert -t unsafe -O raw "$disk" @OUT@
peak "diskimg convert -t none" "$D" convert -t none -O raw "$disk" @OUT@
peak "qemu-img convert (default)" qemu-img convert -O raw "$disk" @OUT@
