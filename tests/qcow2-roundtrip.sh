#!/bin/bash
# qcow2 -> qcow2 round trips through diskimg (reader and writer together):
# qemu-img-made sources of several kinds, plain and compressed output; the
# output passes qemu-img check, compares identical with the source, and
# diskimg reads it back like qemu-img does.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
gen -s 21 -a 75 -m 4K -M 128K 6M src.raw
qemu-img convert -O qcow2 -o cluster_size=4K src.raw a.qcow2
qemu-img convert -c -O qcow2 -o compression_type=zstd src.raw b.qcow2
qemu-img convert -O qcow2 -o extended_l2=on src.raw c.qcow2
qemu-io -c 'write -z 1M 100k' -c 'write -P 0x61 3000000 7000' c.qcow2 >/dev/null
qemu-img create -q -f qcow2 -b a.qcow2 -F qcow2 d.qcow2
qemu-io -c 'write -P 0x62 2M 64k' -c 'write -z 4M 64k' d.qcow2 >/dev/null
for src in a b c d; do
    for opts in "" "-c" "-o compat=0.10,cluster_size=512" "-c -o compression_type=zstd"; do
        out=rt-$src.qcow2
        rm -f $out
        ok "$DISKIMG" convert $opts -O qcow2 $src.qcow2 $out
        qemu-img check -q $out || fail "$src ($opts): qemu-img check fails on the output"
        qcompare $src.qcow2 $out
        readback $out
        "$DISKIMG" check $out >/dev/null || fail "$src ($opts): diskimg check exits $?"
    done
done
# a snapshot out of the source, into a new image
qemu-img snapshot -c snap a.qcow2
qemu-io -c 'write -P 0x63 0 1M' a.qcow2 >/dev/null
rm -f snap.qcow2
ok "$DISKIMG" convert -l snap -O qcow2 a.qcow2 snap.qcow2
qemu-img convert -l snap -O raw a.qcow2 snap.ref
qemu-img compare -q -f qcow2 -F raw snap.qcow2 snap.ref || fail "snapshot round trip differs"
exit 0
