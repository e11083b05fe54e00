#!/bin/bash
# diskimg create -f qcow2 must make the same image as qemu-img create: both
# check clean and qemu-img info (JSON) says the same of both, across the
# option matrix; the default image is even byte-identical.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T"

qemu-img create -q -f raw base.raw 5M

same_info() {   # A B: qemu-img info JSON equal except the file names
    sync "$1" "$2"   # actual-size counts delayed allocations until written back
    qemu-img info --output=json "$1" | grep -v '"filename"' >"$T/a.json"
    qemu-img info --output=json "$2" | grep -v '"filename"' >"$T/b.json"
    diff -u "$T/b.json" "$T/a.json" >&2 || fail "info differs for $1 and $2 ($3)"
}

while read -r opts size; do
    [ "$opts" = - ] && opts=
    rm -f a.qcow2 b.qcow2
    ok "$DISKIMG" create -q -f qcow2 ${opts:+-o "$opts"} a.qcow2 $size
    qemu-img create -q -f qcow2 ${opts:+-o "$opts"} b.qcow2 $size || fail "qemu-img create $opts"
    qemu-img check -q a.qcow2 || fail "qemu-img check: $opts"
    same_info a.qcow2 b.qcow2 "$opts"
    qcompare a.qcow2 b.qcow2
done <<'CASES'
- 1G
compat=0.10 3M
cluster_size=512 3M
cluster_size=2M 100M
cluster_size=4K,refcount_bits=1 7M
refcount_bits=64,lazy_refcounts=on 1T
refcount_bits=2 1M
extended_l2=on 3M
extended_l2=on,cluster_size=16K 9M
compression_type=zstd 3M
preallocation=metadata 3M
preallocation=falloc,cluster_size=4K 3M
preallocation=full,compat=0.10 2M
compat=0.10,cluster_size=1K 3000
extended_l2=on,preallocation=metadata,backing_file=base.raw,backing_fmt=raw 3M
backing_file=base.raw,backing_fmt=raw 3M
cluster_size=512,backing_file=base.raw,backing_fmt=raw 3M
CASES

# the default image is byte for byte what qemu-img writes
rm -f a.qcow2 b.qcow2
ok "$DISKIMG" create -q -f qcow2 a.qcow2 10G
qemu-img create -q -f qcow2 b.qcow2 10G
cmp a.qcow2 b.qcow2 || fail "default 10G image differs from qemu-img's"

# -b/-F: size taken from the backing file, names stored as given
rm -f ov.qcow2
out=$("$DISKIMG" create -f qcow2 -b base.raw -F raw ov.qcow2) || fail "create -b"
[[ $out == "Formatting 'ov.qcow2', fmt=qcow2 cluster_size=65536 extended_l2=off compression_type=zlib size=5242880 backing_file=base.raw backing_fmt=raw lazy_refcounts=off refcount_bits=16" ]] ||
    fail "unexpected message: $out"
qemu-img info --output=json ov.qcow2 >info.json
grep -q '"virtual-size": 5242880' info.json || fail "size not taken from the backing file"
grep -q '"backing-filename": "base.raw"' info.json || fail "backing name"
grep -q '"backing-filename-format": "raw"' info.json || fail "backing format"
qemu-img check -q ov.qcow2 || fail "overlay check"
qcompare ov.qcow2 base.raw

# -u: backing need not exist, size required
ok "$DISKIMG" create -q -f qcow2 -u -b missing.raw -F raw ov2.qcow2 1M
qemu-img info --output=json -U ov2.qcow2 2>/dev/null | grep -q '"backing-filename": "missing.raw"' ||
    fail "-u backing name"

# an existing file is replaced
echo "old content" >old.qcow2
ok "$DISKIMG" create -q -f qcow2 old.qcow2 1M
qemu-img check -q old.qcow2 || fail "replaced file"

# sizes are rounded up to whole sectors, as qemu-img does
ok "$DISKIMG" create -q -f qcow2 odd.qcow2 1000
qemu-img info --output=json odd.qcow2 | grep -q '"virtual-size": 1024' || fail "qcow2 size 1000"
ok "$DISKIMG" create -q -f raw odd.raw 1000
[ "$(stat -c %s odd.raw)" = 1024 ] || fail "raw size 1000 -> $(stat -c %s odd.raw)"

# no temporary files left behind
ls -a | grep -q diskimg && fail "temporary file left: $(ls -a)"
exit 0
