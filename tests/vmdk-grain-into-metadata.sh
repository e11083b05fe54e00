#!/bin/bash
# A sparse VMDK whose grain table maps a grain onto the file's own metadata
# (the embedded descriptor, the grain directory or its redundant copy, a
# grain table, a stream's footer) is corrupt: convert, compare and map
# refuse it with a message naming the grain's range and the metadata's;
# convert --salvage writes zeros there with a warning and the rest right;
# check reports it (exit 2; qemu-img check does not look).  A
# grain past the end of the file: check exit 2 with qemu-img's line (qemu-img
# stops there: "Check failed", exit 1).  qemu-img reads the metadata bytes
# as guest data in every case.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
cd "$T" || fail "cd"

qemu-img create -q -f vmdk good.vmdk 64M || fail "qemu-img create"
qemu-io -f vmdk -c 'write -P 0x55 0 128k' -c 'write -P 0x66 1M 64k' good.vmdk >/dev/null ||
    fail "qemu-io"
qemu-img convert -f vmdk -O raw good.vmdk good.raw || fail "qemu-img convert"
# the layout: descriptor, redundant directory and tables, directory, tables
# (NGT tables of 2048 bytes, one after the other: one range of the map)
read -r DESC DESCN RGD RGT GD GT NGT < <(python3 - good.vmdk <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
cap, grain = struct.unpack_from("<QQ", b, 12)
desc, descn = struct.unpack_from("<QQ", b, 28)
gtes = struct.unpack_from("<I", b, 44)[0]
rgd, gd = struct.unpack_from("<QQ", b, 48)
rgt = struct.unpack_from("<I", b, rgd * 512)[0]
gt = struct.unpack_from("<I", b, gd * 512)[0]
ngt = -(-cap // (grain * gtes))
assert gtes == 512
print(desc * 512, descn * 512, rgd * 512, rgt * 512, gd * 512, gt * 512, ngt)
PY
)
[ "$GT" -gt "$GD" ] && [ "$GD" -gt "$RGD" ] || fail "unexpected layout"

# point IMG SECTOR: LBA 128's grain table entry set to SECTOR
point() {
    cp good.vmdk "$1"
    python3 -c 'import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", d, int(sys.argv[2]) + 4, int(sys.argv[3]))
open(sys.argv[1], "wb").write(d)' "$1" "$GT" "$2" || fail "patch $1"
}

n=0
while read -r name sector what at len; do
    point $name.vmdk "$sector"
    re="$name.vmdk: grain for LBA 128 at offset $((sector * 512)) \\(65536 bytes\\) overlaps the $what at offset $at \\($len bytes\\) \\(offset $((GT + 4))\\)"
    rm -f out.raw
    expect_error "$re" "$DISKIMG" convert -O raw $name.vmdk out.raw
    [ -e out.raw ] && fail "$name: output left"
    expect_error "$re" "$DISKIMG" map $name.vmdk
    rc=0
    "$DISKIMG" compare $name.vmdk good.raw >/dev/null 2>err || rc=$?
    [ $rc = 3 ] && grep -Eq "$re" err || { cat err >&2; fail "$name: compare exit $rc"; }
    # check: the one corruption, named
    rc=0
    "$DISKIMG" check $name.vmdk >out 2>err || rc=$?
    [ $rc = 2 ] || { cat out err >&2; fail "$name: check exit $rc, expected 2"; }
    grep -q "^1 errors were found on the image" out || { cat out >&2; fail "$name: check count"; }
    grep -Eq "^ERROR: grain for LBA 128 at offset $((sector * 512)) .* overlaps the $what" err ||
        { cat err >&2; fail "$name: check message"; }
    # --salvage: LBA 128's grain (64 KiB at 64 KiB) zeros, the rest as it was
    rm -f out.raw
    "$DISKIMG" convert --salvage -O raw $name.vmdk out.raw 2>err || { cat err >&2; fail "$name: --salvage"; }
    grep -q "could not be read (grain for LBA 128 .* overlaps the $what" err ||
        { cat err >&2; fail "$name: --salvage warning"; }
    cp good.raw want.raw
    dd if=/dev/zero of=want.raw bs=64K seek=1 count=1 conv=notrunc status=none
    cmp out.raw want.raw || fail "$name: --salvage output"
    # qemu-img hands the metadata out as guest data
    qemu-img compare -q -f vmdk -F raw $name.vmdk good.raw 2>/dev/null &&
        fail "$name: qemu-img reads the original data?"
    n=$((n + 1))
done <<EOF
into-descriptor $((DESC / 512 + 1)) embedded.descriptor $DESC $DESCN
into-rgd $((RGD / 512)) redundant.grain.directory $RGD $((NGT * 4))
into-rgt $((RGT / 512 + 1)) redundant.grain.tables $RGT $((NGT * 2048))
into-gd $((GD / 512)) grain.directory $GD $((NGT * 4))
into-gt $((GT / 512)) grain.tables $GT $((NGT * 2048))
EOF
[ $n = 5 ] || fail "only $n cases"

# the good image checks clean in both
ok "$DISKIMG" check good.vmdk
qemu-img check -q good.vmdk || fail "qemu-img check good.vmdk"
# a grain past the end of the file
point eof.vmdk 10000000
rc=0
"$DISKIMG" check eof.vmdk >out 2>err || rc=$?
[ $rc = 2 ] && grep -q "^ERROR: cluster offset for sector 128 points after EOF" err ||
    { cat out err >&2; fail "past the end: check exit $rc"; }
rc=0
qemu-img check eof.vmdk >/dev/null 2>qerr || rc=$?
[ $rc = 1 ] && grep -q "ERROR: cluster offset for sector 128 points after EOF" qerr ||
    { cat qerr >&2; fail "qemu-img check past the end: exit $rc"; }

# a streamOptimized file (diskimg's: directory at the end, footer): a grain
# table entry on the grain directory, one on the footer
gen -s 5 -m 4K -M 64K 1M s.raw
ok "$DISKIMG" convert -O vmdk -o subformat=streamOptimized s.raw s.vmdk
read -r SGD SGT SSIZE < <(python3 - s.vmdk <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
gd = struct.unpack_from("<Q", b, len(b) - 1024 + 56)[0] * 512
print(gd, struct.unpack_from("<I", b, gd)[0] * 512, len(b))
PY
)
for target in gd footer; do
    cp s.vmdk s-$target.vmdk
    sector=$((SGD / 512)); what="grain directory"
    [ $target = footer ] && sector=$((SSIZE / 512 - 2)) && what="footer"
    python3 -c 'import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", d, int(sys.argv[2]), int(sys.argv[3]))
open(sys.argv[1], "wb").write(d)' s-$target.vmdk "$SGT" "$sector" || fail "patch"
    rm -f out.raw
    expect_error "s-$target.vmdk: grain for LBA 0 at offset $((sector * 512)) \\(12 bytes\\) overlaps the $what" \
        "$DISKIMG" convert -O raw s-$target.vmdk out.raw
    [ -e out.raw ] && fail "stream, grain on the $target: output left"
    rc=0
    "$DISKIMG" check s-$target.vmdk >/dev/null 2>err || rc=$?
    [ $rc = 2 ] || { cat err >&2; fail "stream, grain on the $target: check exit $rc"; }
done
ok "$DISKIMG" check s.vmdk
exit 0
