#!/bin/bash
# convert onto a block device without -n: the device is not a new file, its
# old bytes show through every range the conversion does not write, so zero
# runs must be cleared there as with -n (they used to be skipped, as holes
# of a new file: the device kept its old bytes where the source has zeros;
# qemu-img writes the zeros).
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || exit 1
# zeros known from metadata (a hole), zeros found by scanning, data, and an
# end that is not sector-aligned after a zero run
truncate -s 1M src.raw
head -c 4096 /dev/urandom | dd of=src.raw bs=4096 seek=10 conv=notrunc status=none
dd if=/dev/zero of=src.raw bs=4096 seek=20 count=16 conv=notrunc status=none
head -c 4096 /dev/urandom | dd of=src.raw bs=4096 seek=100 conv=notrunc status=none
truncate -s 1049000 src.raw
head -c 2M /dev/urandom > dev.img
loops=()
trap 'for l in "${loops[@]}"; do losetup -d "$l"; done' EXIT
l=$(losetup -f --show dev.img 2>/dev/null) || skip "no loop devices here"
loops+=("$l")
for t in writeback none; do
    dd if=/dev/urandom of="$l" bs=1M count=2 conv=fsync status=none || fail "fill $l"
    ok "$DISKIMG" convert -t "$t" -f raw -O raw src.raw "$l"
    cmp -n 1049000 src.raw "$l" || fail "-t $t: the device does not hold the source"
    # and what qemu-img makes of it agrees over the image
    head -c 1049000 "$l" > got.raw
    qemu-img compare -q -f raw -F raw src.raw got.raw || fail "-t $t: qemu-img compare"
done
exit 0
