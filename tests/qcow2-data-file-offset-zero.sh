#!/bin/bash
# An external data file with extended L2 entries: guest cluster 0 lives at
# data-file offset 0, which is a real host offset (not "no cluster"), and
# each subcluster is read at its own offset inside the cluster (issue 10
# item 13: bytes 2048-4095 came out as zeros).  Content and map as qemu's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
for raw in off on; do
    for w in "2048 2048" "0 2048" "63488 4096" "6144 100000"; do
        rm -f x.qcow2 ext.raw
        qemu-img create -q -f qcow2 -o data_file=ext.raw,data_file_raw=$raw,extended_l2=on \
            x.qcow2 1M || fail "create"
        qemu-io -c "write -P 0xaa $w" x.qcow2 >/dev/null || fail "qemu-io write $w"
        readback x.qcow2
        "$DISKIMG" map --output=json x.qcow2 >mine.json || fail "map ($raw, $w)"
        qemu-img map --output=json x.qcow2 >ref.json
        cmp mine.json ref.json || { diff mine.json ref.json; fail "map json ($raw, $w)"; }
        "$DISKIMG" map x.qcow2 >mine.txt || fail "map ($raw, $w)"
        qemu-img map x.qcow2 >ref.txt
        cmp mine.txt ref.txt || { diff mine.txt ref.txt; fail "map ($raw, $w)"; }
        ok "$DISKIMG" compare x.qcow2 ext.raw >/dev/null
    done
done
# without extended L2 too: cluster 0 at data-file offset 0
qemu-img create -q -f qcow2 -o data_file=plain.raw plain.qcow2 1M
qemu-io -c 'write -P 0xbb 512 1024' plain.qcow2 >/dev/null
readback plain.qcow2
"$DISKIMG" map --output=json plain.qcow2 >mine.json || fail "map plain"
qemu-img map --output=json plain.qcow2 >ref.json
cmp mine.json ref.json || { diff mine.json ref.json; fail "map json plain"; }
exit 0
