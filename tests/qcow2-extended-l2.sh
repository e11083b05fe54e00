#!/bin/bash
# Extended L2 entries (subclusters): partial writes, zeroed and unallocated
# subclusters, with and without a backing file underneath, compressed
# clusters among them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

for cs in 16K 64K 2M; do
    img=$T/x-$cs.qcow2
    qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=$cs "$img" 8M || fail "create $cs"
    # subclusters are cs/32: 512 B, 2 KiB, 64 KiB
    qemu-io -c 'write -P 0x31 0 1k' -c 'write -P 0x32 5000 3000' -c 'write -z 4096 1k' \
            -c 'write -P 0x33 1M 300k' -c 'write -z 1100k 20k' -c 'write -P 0x34 4M 2k' \
            "$img" >/dev/null || fail "qemu-io $cs"
    readback "$img"
    "$DISKIMG" info --output=json "$img" | grep -q '"extended-l2": true' || fail "info extended-l2"
done

# over a backing file: unallocated subclusters show the backing data
qemu-img create -q -f raw "$T/base.raw" 4M
qemu-io -f raw -c 'write -P 0xee 0 4M' "$T/base.raw" >/dev/null
qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=64K -b base.raw -F raw "$T/top.qcow2"
qemu-io -c 'write -P 0x41 2k 2k' -c 'write -z 10k 4k' -c 'write -P 0x42 70k 1k' \
        -c 'write -z -u 1M 64k' "$T/top.qcow2" >/dev/null || fail "qemu-io top"
readback "$T/top.qcow2"
"$BDREAD" -m "$T/top.qcow2" > "$T/map"
# [0,2k) backing, [2k,4k) this layer's data, [4k,10k) backing, [10k,14k) zero
# subclusters of a cluster that has a host offset (preallocated zero)
grep -q '^0 2048 data 1$' "$T/map" || { cat "$T/map"; fail "subcluster 0 not from the backing file"; }
grep -q '^2048 2048 data 0$' "$T/map" || { cat "$T/map"; fail "allocated subcluster"; }
grep -q '^10240 4096 zero 0$' "$T/map" || { cat "$T/map"; fail "zeroed subclusters"; }

# compressed clusters in an extended-L2 image
qemu-img convert -c -O qcow2 -o extended_l2=on,cluster_size=32K "$T/base.raw" "$T/xc.qcow2" ||
    fail "convert -c extended_l2"
qemu-io -c 'write -P 0x51 33k 1k' "$T/xc.qcow2" >/dev/null
readback "$T/xc.qcow2"
exit 0
