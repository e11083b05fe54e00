#!/bin/bash
# info's qcow2 details against qemu-img info --output=json on the same
# images: the whole "format-specific" object (keys, values, order),
# cluster-size, dirty-flag and the snapshot list.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
section() { awk -v k="\"$2\": " 'index($0, k) == 5 {on=1} on {print} on && /^    []}],?$/ {exit}' "$1" | sed 's/,$//'; }
line() { grep "^    \"$2\": " "$1" | sed 's/,$//'; }
same_info() {
    local img=$1
    "$DISKIMG" info --output=json "$img" > mine.json || fail "diskimg info $img"
    qemu-img info --output=json "$img" > ref.json || fail "qemu-img info $img"
    for s in format-specific snapshots; do
        section mine.json $s > a; section ref.json $s > b
        cmp a b || { diff a b; fail "$img: \"$s\" differs from qemu-img's"; }
    done
    for k in cluster-size dirty-flag virtual-size; do
        [ "$(line mine.json $k)" = "$(line ref.json $k)" ] ||
            fail "$img: $k: $(line mine.json $k) vs $(line ref.json $k)"
    done
    section ref.json format-specific | grep -q '"type": "qcow2"' || fail "no format-specific data"
}

qemu-img create -q -f qcow2 -o compat=0.10 v2.qcow2 3M
same_info v2.qcow2
qemu-img create -q -f qcow2 -o lazy_refcounts=on,refcount_bits=4,cluster_size=16K v3.qcow2 5M
same_info v3.qcow2
qemu-img create -q -f qcow2 -o extended_l2=on,compression_type=zstd xz.qcow2 1G
same_info xz.qcow2
qemu-img create -q -f qcow2 -o data_file=d.raw,data_file_raw=on df.qcow2 2M
same_info df.qcow2
qemu-img create -q -f qcow2 -o data_file=d2.raw df2.qcow2 2M
same_info df2.qcow2
# bitmaps (one auto, one disabled) and snapshots
qemu-img create -q -f qcow2 bm.qcow2 8M
qemu-io -c 'write -P 1 0 1M' bm.qcow2 >/dev/null
qemu-img bitmap --add bm.qcow2 first
qemu-img bitmap --add -g 1M --disable bm.qcow2 second
qemu-img snapshot -c snap1 bm.qcow2
qemu-img snapshot -c 'a longer snapshot name' bm.qcow2
same_info bm.qcow2
grep -q '"name": "second"' mine.json || fail "bitmap list missing"
# a dirty image
qemu-img create -q -f qcow2 -o lazy_refcounts=on dirty.qcow2 1M
sh -c 'qemu-io -c "write -P 1 0 64k" -c abort "$1"' sh dirty.qcow2 >/dev/null 2>&1 || true
same_info dirty.qcow2
grep -q '"dirty-flag": true' mine.json || fail "dirty flag"
# backing files named as qemu-img names them: joined to the folder part of
# the name given, not made absolute ("sub/top" + "base" = "sub/base")
mkdir -p sub
qemu-img create -q -f qcow2 sub/base.qcow2 1M
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 sub/top.qcow2
for name in sub/top.qcow2 ./sub/top.qcow2 "$PWD/sub/top.qcow2"; do
    for out in human json; do
        qemu-img info --backing-chain --output=$out "$name" | grep -E 'filename|image:|backing file:' >ref.names
        "$DISKIMG" info --backing-chain --output=$out "$name" | grep -E 'filename|image:|backing file:' >mine.names
        sort ref.names | diff - <(sort mine.names) >&2 || fail "$name ($out): backing names differ from qemu-img's"
    done
done
exit 0
