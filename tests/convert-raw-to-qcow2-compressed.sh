#!/bin/bash
# diskimg convert -c -O qcow2, zlib and zstd: clean, identical content,
# incompressible clusters stored plain, compression type in qemu-img info,
# and no larger than qemu-img convert -c (+2%).
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T"

gen -s 21 -m 4K -M 512K 8M src.raw
head -c $((5 * 1024 * 1024 + 2560)) src.raw >odd.raw

while read -r src opts plain expect; do
    [ "$opts" = - ] && opts=
    out=c.qcow2 ref=r.qcow2
    ok "$DISKIMG" convert -t unsafe -c -O qcow2 ${opts:+-o "$opts"} "$src" $out
    qemu-img check --output=json $out >check.json || { cat check.json; fail "check: $opts"; }
    qcompare "$src" $out
    # some clusters compressed, the random ones stored plain
    comp=$(sed -n 's/.*"compressed-clusters": \([0-9]*\).*/\1/p' check.json)
    alloc=$(sed -n 's/.*"allocated-clusters": \([0-9]*\).*/\1/p' check.json)
    [ "${comp:-0}" -gt 0 ] || fail "'$opts': nothing compressed"
    # (random runs are at most 512 KiB: 2 MiB clusters always hold some text)
    [ "$plain" = no ] || [ "$comp" -lt "$alloc" ] ||
        fail "'$opts': incompressible clusters were not stored plain"
    qemu-img info --output=json $out | tr -d ' ' | grep -q "$expect" || fail "info lacks $expect"
    qemu-img convert -c -O qcow2 ${opts:+-o "$opts"} "$src" $ref || fail "qemu-img convert -c"
    ours=$(stat -c %s $out) theirs=$(stat -c %s $ref)
    [ "$ours" -le $((theirs + theirs / 50)) ] ||
        fail "'$opts': $ours bytes, qemu-img -c makes $theirs"
    rm -f $out $ref
done <<'CASES'
src.raw - yes "compression-type":"zlib"
src.raw compression_type=zstd yes "compression-type":"zstd"
src.raw compat=0.10,cluster_size=4K yes "compat":"0.10"
src.raw cluster_size=512 yes "cluster-size":512
src.raw compression_type=zstd,cluster_size=16K,refcount_bits=1 yes "refcount-bits":1
src.raw compression_type=zstd,refcount_bits=2 yes "refcount-bits":2
src.raw extended_l2=on yes "extended-l2":true
odd.raw - yes "virtual-size":5245440
odd.raw compression_type=zstd,cluster_size=2M no "cluster-size":2097152
CASES

# -c with preallocation is refused, as by qemu-img
expect_error "Compression and preallocation not supported" \
    "$DISKIMG" convert -c -O qcow2 -o preallocation=metadata src.raw p.qcow2
[ -e p.qcow2 ] && fail "p.qcow2 left behind"
exit 0
