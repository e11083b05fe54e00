#!/bin/bash
# A data cluster (or compressed data) that points into the image's own
# metadata is corruption (issue 10 item 5): convert and map refuse it with
# a message naming both ranges, compare fails on it (block status, exit 3),
# convert --salvage writes zeros there with a warning, and check reports
# it -- also where the refcounts were made to agree, so that qemu-img check
# sees nothing wrong.  An external data file holds no metadata: offsets
# there are not checked.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
need python3

cd "$T" || fail "cd"
qemu-img create -q -f qcow2 base.qcow2 4M
qemu-io -c 'write -P 0x71 0 192k' base.qcow2 >/dev/null
qemu-img snapshot -c s1 base.qcow2
qemu-io -c 'write -P 0x72 0 64k' -c 'write -P 0x73 2M 64k' base.qcow2 >/dev/null
qemu-img bitmap --add base.qcow2 bm
qemu-img convert -O raw base.qcow2 base.raw
L1=$(peek64 base.qcow2 40)
L2=$(( $(peek64 base.qcow2 "$L1") & 0x00fffffffffffe00 ))
REFT=$(peek64 base.qcow2 48)
RBLK=$(peek64 base.qcow2 "$REFT")
SNAPS=$(peek64 base.qcow2 64)
SNL1=$(peek64 base.qcow2 "$SNAPS")
read -r BMDIR _ < <(python3 "$TOP/tests/qcow2/bitmaps.py" base.qcow2 show)
BMTAB=$(peek64 base.qcow2 "$BMDIR")
E1=$((L2 + 8))            # the L2 entry of guest cluster 1 (64 KiB)

n=0
# over WHAT HOST [ENTRY]: guest cluster 1 points at HOST
over() {
    local what=$1 host=$2 entry=${3:-$(be64 "$2")} img
    n=$((n + 1)); img=over$n.qcow2
    cp base.qcow2 $img
    poke $img $E1 "$entry"
    local re="data cluster of guest offset 65536 \(host offset $host, 65536 bytes\) overlaps the $what \(host offset [0-9]+, [0-9]+ bytes\)"
    expect_error "$re" "$DISKIMG" convert -O raw $img out.raw
    [ -e out.raw ] && fail "$what: output left behind"
    expect_error "$re" "$DISKIMG" map $img
    expect_error "$re" "$DISKIMG" map --output=json $img
    local rc=0
    "$DISKIMG" compare $img base.raw >cmp.out 2>cmp.err || rc=$?
    [ $rc = 3 ] && grep -Eq "$re" cmp.err || { cat cmp.out cmp.err; fail "$what: compare exit $rc"; }
    # --salvage: zeros for that cluster, a warning, the rest as qemu reads it
    "$DISKIMG" convert --salvage -O raw $img salv.raw 2>salv.err ||
        { cat salv.err; fail "$what: --salvage failed"; }
    grep -Eq "overlaps the $what" salv.err || { cat salv.err; fail "$what: no warning"; }
    qemu-img convert -O raw $img ref.raw
    cmp -n 65536 salv.raw ref.raw || fail "$what: --salvage cluster 0"
    cmp -i 131072 salv.raw ref.raw || fail "$what: --salvage after cluster 1"
    cmp -n 65536 -i 65536:0 salv.raw /dev/zero || fail "$what: --salvage: not zeros"
    # check: corruptions, as qemu-img check finds them (exit 2)
    local mine=0 ref=0
    "$DISKIMG" check $img >chk.out 2>&1 || mine=$?
    qemu-img check $img >qchk.out 2>&1 || ref=$?
    [ $mine = 2 ] && [ $ref = 2 ] || { cat chk.out qchk.out; fail "$what: check exit $mine, qemu-img $ref"; }
    rm -f salv.raw ref.raw
}
over "L1 table" "$L1"
over "L2 table" "$L2"
over "refcount table" "$REFT"
over "refcount block" "$RBLK"
over "snapshot table" "$SNAPS"
over "L1 table of a snapshot" "$SNL1"
over "bitmap directory" "$BMDIR"
over "bitmap table" "$BMTAB"

# --salvage after a hole (guest clusters 3 and 4 unallocated, 5 over the
# L1 table): one warning for the cluster, zeros there, the rest as qemu's
cp base.qcow2 hole.qcow2
poke hole.qcow2 $((L2 + 5 * 8)) "$(be64 "$L1")"
"$DISKIMG" convert --salvage -O raw hole.qcow2 salv.raw 2>salv.err || { cat salv.err; fail "hole: --salvage"; }
[ "$(grep -c "bytes could not be read (" salv.err)" = 1 ] || { cat salv.err; fail "hole: not one warning"; }
grep -q "65536 bytes could not be read (data cluster of guest offset 327680" salv.err ||
    { cat salv.err; fail "hole: warning"; }
qemu-img convert -O raw hole.qcow2 ref.raw
cmp -n 327680 salv.raw ref.raw && cmp -i 393216 salv.raw ref.raw || fail "hole: --salvage data"
cmp -n 65536 -i 327680:0 salv.raw /dev/zero || fail "hole: --salvage: not zeros"

# compressed data over an L2 table (one sector at the table's start)
cp base.qcow2 comp.qcow2
poke comp.qcow2 $E1 "$(be64 $(( (1 << 62) | L2 )))"
expect_error "compressed data of guest offset 65536 \(host offset $L2, 512 bytes\) overlaps the L2 table \(host offset $L2, 65536 bytes\)" \
    "$DISKIMG" convert -O raw comp.qcow2 out.raw

# refcounts made to agree: the L1 table's cluster says 2, the entry's copied
# flag is clear; qemu-img check finds nothing, diskimg check the overlap
cp base.qcow2 agree.qcow2
poke agree.qcow2 $E1 "$(be64 "$L1")"
poke agree.qcow2 $((RBLK + L1 / 65536 * 2)) 0002
old=$(( $(peek64 base.qcow2 $E1) & 0x00fffffffffffe00 ))   # shared with s1: 2 -> 1
poke agree.qcow2 $((RBLK + old / 65536 * 2)) 0001
rc=0; qemu-img check agree.qcow2 >qchk.out 2>&1 || rc=$?
[ $rc = 0 ] || { cat qchk.out; fail "qemu-img check finds the agreed image corrupt (exit $rc)"; }
rc=0; "$DISKIMG" check agree.qcow2 >chk.out 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "ERROR data at host offset 0x$(printf %x "$L1") (0x10000 bytes) overlaps the L1 table" chk.out ||
    { cat chk.out; fail "check of the agreed image: exit $rc"; }
expect_error "overlaps the L1 table" "$DISKIMG" convert -O raw agree.qcow2 out.raw
# convert -n would write guest data over the L1 table: its check refuses
# (without the bitmaps, which -n refuses on their own)
cp agree.qcow2 agree-n.qcow2
qemu-img bitmap --remove agree-n.qcow2 bm || fail "bitmap --remove"
cp agree-n.qcow2 agree-before.qcow2
expect_error "the image has 1 corruptions and 0 check errors" \
    "$DISKIMG" convert -n -O qcow2 base.raw agree-n.qcow2
cmp agree-n.qcow2 agree-before.qcow2 || fail "convert -n changed the refused target"

# a data file: host offsets are the data file's (cluster 3 at its offset
# 196608, which in the image file would be the L1 table)
qemu-img create -q -f qcow2 -o data_file=df.raw df.qcow2 1M
qemu-io -c 'write -P 0x74 0 1M' df.qcow2 >/dev/null
readback df.qcow2
ok "$DISKIMG" map df.qcow2 >/dev/null
exit 0
