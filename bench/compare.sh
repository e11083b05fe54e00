#!/bin/bash
# diskimg compare against qemu-img compare on the seeded bench disk and a copy
# of it (cp makes the written zero runs holes, so the two images differ in
# allocation but not in content), alternating the two tools; prints medians
# and the median of pairwise ratios diskimg/qemu-img (below 1: diskimg faster).
# BENCH_SIZE (default 4G), BENCH_RUNS (default 5), BENCH_DIR (default bench/out).
. "$(dirname "$0")/lib.sh"
size=${BENCH_SIZE:-4G}
disk=$(bench_disk "$size")
copy=$OUT/compare-copy-$size.raw
[ -f "$copy" ] || cp --sparse=always "$disk" "$copy"
# the same copy with its last byte changed: a full scan that ends in a mismatch
last=$OUT/compare-last-$size.raw
if [ ! -f "$last" ]; then
    cp --sparse=always "$disk" "$last"
    printf '\377' | dd of="$last" bs=1 seek=$(( $(stat -c %s "$disk") - 1 )) conv=notrunc status=none
fi
echo "compare: $disk ($(du -h "$disk" | cut -f1) allocated) vs copies ($(du -h "$copy" | cut -f1)); $RUNS alternating runs"
echo "columns: diskimg median, qemu-img median, median of pairwise ratios diskimg/qemu-img"
warm "$disk" "$copy" "$last"

# compare exits 1 on a mismatch; time_cmd only reports, so mask it
ab "compare identical copy: diskimg / qemu-img" \
   "$D compare -q $disk $copy" \
   "qemu-img compare -q $disk $copy"
ab "compare, last byte differs: diskimg / qemu-img" \
   "$D compare -q $disk $last; [ \$? = 1 ]" \
   "qemu-img compare -q $disk $last; [ \$? = 1 ]"
ab "compare disk with itself: diskimg / qemu-img" \
   "$D compare -q $disk $disk" \
   "qemu-img compare -q $disk $disk"
