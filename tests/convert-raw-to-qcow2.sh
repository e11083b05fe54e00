#!/bin/bash
# diskimg convert -O qcow2 across the option matrix: the result checks clean
# (no errors, no leaks), reads back as the source, shows the options in
# qemu-img info, and is no larger than qemu-img convert's (+5%).
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T"

gen -s 11 -m 512 -M 256K 6M src.raw
gen -s 12 -u -m 512 -M 128K 4M odd0.raw
head -c $((3 * 1024 * 1024 + 1536)) odd0.raw >odd.raw   # not a multiple of any cluster

n=0
while read -r src opts flags expect; do
    [ "$opts" = - ] && opts=
    [ "$flags" = - ] && flags=
    n=$((n + 1))
    out=out$n.qcow2 ref=ref$n.qcow2
    ok "$DISKIMG" convert -t unsafe $flags -O qcow2 ${opts:+-o "$opts"} "$src" "$out"
    qemu-img check -q "$out" || fail "check: $opts $flags"
    qcompare "$src" "$out"
    qemu-img info --output=json "$out" | tr -d ' ' | grep -q "$expect" ||
        fail "info of '$opts' lacks $expect"
    qemu-img convert -O qcow2 ${opts:+-o "$opts"} "$src" "$ref" || fail "qemu-img convert $opts"
    ours=$(stat -c %s "$out") theirs=$(stat -c %s "$ref")
    [ "$ours" -le $((theirs + theirs / 20)) ] ||
        fail "'$opts': $ours bytes, qemu-img makes $theirs"
    rm -f "$out" "$ref"
done <<'CASES'
src.raw - - "compat":"1.1"
src.raw compat=0.10 - "compat":"0.10"
src.raw cluster_size=512 -W "cluster-size":512
src.raw cluster_size=4K - "cluster-size":4096
src.raw cluster_size=2M - "cluster-size":2097152
src.raw refcount_bits=1 - "refcount-bits":1
src.raw refcount_bits=64 -W "refcount-bits":64
src.raw lazy_refcounts=on - "lazy-refcounts":true
src.raw extended_l2=on - "extended-l2":true
src.raw extended_l2=on,cluster_size=16K -W "extended-l2":true
src.raw preallocation=metadata - "virtual-size":6291456
src.raw preallocation=falloc - "virtual-size":6291456
src.raw preallocation=full,cluster_size=4K - "cluster-size":4096
odd.raw - - "virtual-size":3147264
odd.raw compat=0.10,cluster_size=2M - "compat":"0.10"
odd.raw extended_l2=on - "extended-l2":true
CASES

# fully allocated output (-S 0): every cluster written, still clean
ok "$DISKIMG" convert -t unsafe -S 0 -O qcow2 src.raw full.qcow2
qemu-img check -q full.qcow2 || fail "check -S 0"
qcompare src.raw full.qcow2

# -t none (O_DIRECT): qcow2 metadata is not block-aligned, still works
ok "$DISKIMG" convert -t none -O qcow2 src.raw direct.qcow2
ok "$DISKIMG" convert -t none -c -O qcow2 src.raw directc.qcow2
for f in direct.qcow2 directc.qcow2; do
    qemu-img check -q $f || fail "check $f"
    qcompare src.raw $f
done

# the header is the last thing written and the output appears only at the end
ok "$DISKIMG" convert -O qcow2 src.raw durable.qcow2
qemu-img check -q durable.qcow2 || fail "check (durable)"
ls -a | grep -q diskimg && fail "temporary file left behind"
exit 0
