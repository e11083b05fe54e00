#!/bin/bash
# qcow2 output onto a block device from a source whose size is not whole
# sectors: the image's virtual size is rounded up to a sector, and the
# bytes between the source's end and the sector's end must read as zeros.
# The last write used to stop at the source's end, which leaves a hole in
# a new file but the device's old bytes on a device (they showed through
# as guest data).
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || exit 1
head -c 1000 /dev/urandom > small.raw
head -c $((1024 * 1024 + 70000)) /dev/urandom > big.raw
head -c 4M /dev/zero > dev.img
loops=()
trap 'for l in "${loops[@]}"; do losetup -d "$l"; done' EXIT
l=$(losetup -f --show dev.img 2>/dev/null) || skip "no loop devices here"
loops+=("$l")
for s in small big; do
    qemu-img convert -f raw -O qcow2 $s.raw ref.qcow2 || fail "qemu-img $s"
    for o in "" "-o compat=0.10" "-o extended_l2=on" "-o cluster_size=512" "-c"; do
        dd if=/dev/urandom of="$l" bs=1M count=4 conv=fsync status=none || fail "fill $l"
        ok "$DISKIMG" convert -f raw -O qcow2 $o $s.raw "$l"
        qemu-img check -q "$l" || fail "$s $o: check"
        qemu-img compare -q ref.qcow2 "$l" || fail "$s $o: differs from qemu-img's image"
    done
done
exit 0
