#!/bin/bash
# make bench: diskimg against qemu-img (and cp, fallocate) on the same
# seeded disk, in one run; prints medians and ratios (diskimg / other).
# BENCH_SIZE (default 4G), BENCH_RUNS (default 5), BENCH_DIR (default bench/out).
. "$(dirname "$0")/lib.sh"
size=${BENCH_SIZE:-4G}
disk=$(bench_disk "$size")
echo "bench disk: $disk ($(du -h "$disk" | cut -f1) allocated of $size); $RUNS alternating runs each"
echo "columns: diskimg median, other median, median of pairwise ratios diskimg/other"
warm "$disk"

ab "raw->raw: diskimg -t unsafe / qemu-img" \
   "$D convert -t unsafe -f raw -O raw $disk @OUT@" \
   "qemu-img convert -f raw -O raw $disk @OUT@"
# the floor: the same number of bytes written into the page cache of a new
# file from /dev/zero (nothing read, nothing scanned) -- on these machines
# that copy into the page cache, serialised per file by the file system,
# is most of what both tools spend
"$D" convert -q -t unsafe -f raw -O raw "$disk" "$OUT/floor.raw"
mib=$(( $(stat -c %b "$OUT/floor.raw") * 512 / 1048576 ))
rm -f "$OUT/floor.raw"
ab "raw->raw: diskimg -t unsafe / dd ${mib}M (floor)" \
   "$D convert -t unsafe -f raw -O raw $disk @OUT@" \
   "dd if=/dev/zero of=@OUT@ bs=1M count=$mib status=none"
ab "raw->raw: diskimg -t unsafe / cp --sparse=always" \
   "$D convert -t unsafe -f raw -O raw $disk @OUT@" \
   "cp --sparse=always $disk @OUT@"
ab "raw->raw: diskimg (durable, fsync) / qemu-img -t writeback" \
   "$D convert -f raw -O raw $disk @OUT@" \
   "qemu-img convert -t writeback -f raw -O raw $disk @OUT@ && sync -f @OUT@"

# sparsify vs fallocate --dig-holes on dense copies made outside the timing
dense_ab() {
    local i ta tb ratios=""
    for i in $(seq 1 "$RUNS"); do
        cp --sparse=never "$disk" "$OUT/dense-a.raw"; cp --sparse=never "$disk" "$OUT/dense-b.raw"
        sync
        local s e
        s=$(now); "$D" sparsify -q "$OUT/dense-a.raw"; e=$(now); ta=$(awk "BEGIN{print $e - $s}")
        s=$(now); fallocate --dig-holes "$OUT/dense-b.raw"; sync -f "$OUT/dense-b.raw"; e=$(now); tb=$(awk "BEGIN{print $e - $s}")
        fa=$(stat -c %b "$OUT/dense-a.raw"); fb=$(stat -c %b "$OUT/dense-b.raw")
        rm -f "$OUT/dense-a.raw" "$OUT/dense-b.raw"
        ratios="$ratios $(awk "BEGIN{printf \"%.3f\", $ta / $tb}")"
        [ "$fa" -le "$fb" ] || echo "  note: sparsify left $fa blocks, dig-holes $fb" >&2
    done
    printf '%-44s ratio %5.2f  (pairs:%s)\n' "sparsify / fallocate --dig-holes (+sync)" \
        "$(echo $ratios | tr ' ' '\n' | median)" "$ratios"
}
dense_ab

[ -x "$TOP/bench/qcow2.sh" ] && "$TOP/bench/qcow2.sh"
[ -x "$TOP/bench/vmdk.sh" ] && "$TOP/bench/vmdk.sh"
[ -x "$TOP/bench/commands.sh" ] && "$TOP/bench/commands.sh" -n "$RUNS"
[ -x "$TOP/bench/zerobench" ] && "$TOP/bench/zerobench" --quick
exit 0
