#!/bin/bash
# The JSON of info, info --backing-chain, check and measure is byte for byte
# qemu-img's, key order included (qemu-img prints its QDicts bucket by
# bucket: src/cli/json_order.c), for images qemu-img wrote in every format
# both read: qcow2 with a backing file, snapshots and bitmaps, compressed
# zstd qcow2, vmdk sparse, stream and split, dynamic and fixed VHD, VDI.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"
mkdir -p sub

qemu-img create -q -f qcow2 sub/base.qcow2 4M
qemu-io -c 'write -P 1 0 1M' sub/base.qcow2 >/dev/null
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 sub/top.qcow2
qemu-io -c 'write -P 2 512k 1M' sub/top.qcow2 >/dev/null
qemu-img create -q -f qcow2 bm.qcow2 8M
qemu-io -c 'write -P 3 0 1M' bm.qcow2 >/dev/null
qemu-img bitmap --add bm.qcow2 first
qemu-img bitmap --add -g 1M --disable bm.qcow2 second
qemu-img snapshot -c snap1 bm.qcow2
qemu-img create -q -f qcow2 -o compression_type=zstd,extended_l2=on z.qcow2 8M
qemu-img convert -c -f qcow2 -O qcow2 -o compression_type=zstd bm.qcow2 z.qcow2
qemu-img convert -f qcow2 -O vmdk bm.qcow2 sparse.vmdk
qemu-img convert -f qcow2 -O vmdk -o subformat=streamOptimized bm.qcow2 stream.vmdk
qemu-img convert -f qcow2 -O vmdk -o subformat=twoGbMaxExtentSparse bm.qcow2 split.vmdk
qemu-img convert -f qcow2 -O vpc bm.qcow2 dyn.vhd
qemu-img convert -f qcow2 -O vpc -o subformat=fixed bm.qcow2 fixed.vhd
qemu-img convert -f qcow2 -O vdi bm.qcow2 d.vdi

# same ARGS...: both tools' stdout and exit status equal
same() {
    qemu-img "$@" >q.out 2>&1; local qs=$?
    "$DISKIMG" "$@" >d.out 2>&1; local ds=$?
    [ "$qs" = "$ds" ] || { cat q.out d.out >&2; fail "$*: exit $ds, qemu-img $qs"; }
    cmp -s q.out d.out || { diff q.out d.out >&2; fail "$*: output differs from qemu-img's"; }
}

for img in sub/top.qcow2 bm.qcow2 z.qcow2; do
    same info --output=json "$img"
    same info --backing-chain --output=json "$img"
    same check --output=json "$img"
    same measure --output=json -O qcow2 "$img"
    same measure --output=json -O raw "$img"
done
for img in sparse.vmdk stream.vmdk split.vmdk; do
    same info --output=json "$img"
    same check --output=json "$img"
done
same info --output=json dyn.vhd
same info --output=json -f vpc fixed.vhd
same info --output=json d.vdi
same check --output=json d.vdi
same measure --output=json -O qcow2 --size 1G
same measure --output=json -O qcow2 -o cluster_size=16k,extended_l2=on --size 3G
exit 0
