#!/bin/bash
# check's work is bounded by what the file holds, not by the counts the
# image claims (issue 10 item 15): 65536 snapshots whose 4M-entry L1 tables
# are past the end of the file, or inside it and all the same table of
# zeros; 65535 bitmaps naming one table of entries past the end of the
# file; a bitmap table past the end of the file.  Each took minutes to
# hours; each ends within seconds now, with the problem reported, and
# `convert -n` into such an image (which checks it first) as well.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
need python3

cd "$T" || fail "cd"
lim=30
qemu-img create -q -f raw src.raw 1M

# snapshots: L1 tables (32 MiB each) at 64 MiB, past the end of a 5 MB file
qemu-img create -q -f qcow2 snaps.qcow2 1G
python3 "$TOP/tests/qcow2/manysnaps.py" snaps.qcow2 65536 $((64 << 20)) $((4 << 20)) ||
    fail "manysnaps"
rc=0
timeout $lim "$DISKIMG" check --output=json snaps.qcow2 >out.json 2>err.txt || rc=$?
[ $rc = 2 ] || { tail -n 3 out.json err.txt; fail "snapshots past the end: check exit $rc"; }
# one error per snapshot L1 table (and the refcount errors of the header)
c=$(sed -n 's/.*"corruptions": \([0-9]*\).*/\1/p' out.json)
[ "${c:-0}" -ge 65536 ] || fail "corruptions: $c"
grep -q "exceeding the end of the file.*offset 0x4000000 size 0x2000000" err.txt ||
    fail "no line for the L1 tables"
grep -q "(55536 more problem lines like the above not shown)" err.txt ||
    { tail -n 2 err.txt; fail "lines not limited"; }
# the same tables inside the file (a sparse 100 MiB file: all zeros)
cp snaps.qcow2 inside.qcow2
truncate -s $((100 << 20)) inside.qcow2
rc=0
timeout $lim "$DISKIMG" check inside.qcow2 >out.txt 2>err.txt || rc=$?
[ $rc = 1 ] && grep -q "name more than 268435456 table entries" err.txt ||
    { tail -n 3 out.txt err.txt; fail "snapshots sharing one L1 table: check exit $rc"; }
rc=0
timeout $lim "$DISKIMG" convert -n -O qcow2 src.raw inside.qcow2 2>err.txt || rc=$?
[ $rc = 1 ] && grep -q "name more than 268435456 table entries" err.txt ||
    { cat err.txt; fail "convert -n into it: exit $rc"; }

# bitmaps: 65535 bitmaps naming one table of 300000 entries, each naming a
# cluster past the end of the file (512-byte clusters: 2.4 MB of table)
qemu-img create -q -f qcow2 -o cluster_size=512 bm.qcow2 1G
qemu-img bitmap --add -g 512 bm.qcow2 b0
toff=$(( ($(stat -c %s bm.qcow2) + 511) / 512 * 512 ))
python3 -c "
import struct, sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(int(sys.argv[2])); f.write(struct.pack('>Q', 1 << 40) * 300000)" bm.qcow2 $toff ||
    fail "table"
cp bm.qcow2 one.qcow2
python3 "$TOP/tests/qcow2/bitmaps.py" bm.qcow2 clone 65535 9 $toff 300000 || fail "clone"
rc=0
timeout $lim "$DISKIMG" check bm.qcow2 >out.txt 2>err.txt || rc=$?
[ $rc = 2 ] && grep -q "ERROR bitmap tables overlap: bitmap 1 (b1)" out.txt err.txt ||
    { tail -n 3 out.txt err.txt; fail "bitmaps sharing a table: check exit $rc"; }
# one bitmap with that table: 300000 errors, not all printed
python3 "$TOP/tests/qcow2/bitmaps.py" one.qcow2 set 0 table_offset $toff || fail "set"
python3 "$TOP/tests/qcow2/bitmaps.py" one.qcow2 set 0 table_size 300000 || fail "set"
rc=0
timeout $lim "$DISKIMG" check --output=json one.qcow2 >out.json 2>err.txt || rc=$?
[ $rc = 2 ] && grep -Eq '"corruptions": 30[0-9]{4},' out.json &&
    grep -q "more problem lines like the above not shown" err.txt ||
    { tail -n 3 out.json err.txt; fail "one bitmap: check exit $rc"; }
# a table past the end of the file: refused at open
python3 "$TOP/tests/qcow2/bitmaps.py" one.qcow2 set 0 table_size $((1 << 20)) || fail "set"
expect_error "bitmap 'b0': table \(1048576 entries at offset $toff\) runs past the end of the file" \
    timeout $lim "$DISKIMG" check one.qcow2
exit 0
