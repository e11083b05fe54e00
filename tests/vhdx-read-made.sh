#!/bin/bash
# VHDXs laid out from [MS-VHDX] (tests/tools/vhdxmake.py) for what qemu-img
# cannot make or read: differencing disks (partially present blocks whose
# sector bitmaps leave sectors to the parent, never the garbage stored
# there; the parent found through relative_path, absolute_win32_path or
# volume_path; its DataWriteGuid checked against parent_linkage; a path out
# of the folder refused), 4096-byte logical sectors, every payload block
# state (zero, unmapped, undefined, not present: zeros in a dynamic disk,
# the parent's in a differencing one except zero and unmapped), disks
# larger than one chunk (the BAT's sector bitmap entries between payload
# entries), fixed disks.  Each reads as the layout says; libvhdi's
# vhdimount (which follows the parent too) reads the same.
. "$(dirname "$0")/lib.sh"
need python3
MK="python3 $TOP/tests/tools/vhdxmake.py"
M=$((1 << 20))

check_reads() {   # check_reads IMAGE EXPECTED
    ok "$DISKIMG" convert -O raw "$1" "$T/got.raw"
    cmp "$T/got.raw" "$2" || fail "$1 reads wrong"
    ok "$DISKIMG" compare "$1" "$2" > /dev/null
}
# the disk vhdimount shows for IMAGE (for a differencing disk it shows the
# parent too: the child is the last one)
yal_check() {   # yal_check IMAGE EXPECTED
    command -v vhdimount > /dev/null && [ -c /dev/fuse ] || return 0
    local mnt
    mnt=$(mktemp -d "$T/yal.XXXXXX")
    timeout 30 vhdimount "$1" "$mnt" > /dev/null 2>&1 || { rmdir "$mnt"; fail "vhdimount $1"; }
    local last
    last=$(ls "$mnt" | sort -V | tail -n 1)
    cmp "$mnt/$last" "$2" > /dev/null; local rc=$?
    umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt" 2>/dev/null || fusermount -u "$mnt"
    rmdir "$mnt"
    [ $rc = 0 ] || fail "vhdimount reads $1 differently"
}

# a parent with data in blocks 0, 3 and 7, a block forced zero
$MK "$T/p.vhdx" --size $((8 * M)) --write 0:$M:0x11 --write $((3 * M)):4096:0x22 \
    --write $((7 * M)):$M:0x55 --expect "$T/p.raw" || fail vhdxmake
check_reads "$T/p.vhdx" "$T/p.raw"
yal_check "$T/p.vhdx" "$T/p.raw"

# children: sectors here and there; block 6 zero (over the parent's
# nothing), block 7 unmapped over the parent's data (zeros), block 3
# undefined (the parent's)
C="--write 512:512:0x33 --write $((5 * M)):8192:0x44 --write $((7 * M + 4096)):4096:0x66 --state 3:1"
for loc in 'relative_path=.\p.vhdx' 'relative_path=p.vhdx' 'absolute_win32_path=C:\VMs\p.vhdx' \
           'volume_path=\\?\Volume{26a21bda-a627-11d7-9931-806e6f6e6963}\VMs\p.vhdx'; do
    $MK "$T/c.vhdx" --type diff --size $((8 * M)) --parent "$T/p.vhdx" --parent-raw "$T/p.raw" \
        --loc "$loc" $C --expect "$T/c.raw" || fail vhdxmake
    check_reads "$T/c.vhdx" "$T/c.raw"
    "$DISKIMG" info --output=json "$T/c.vhdx" | grep -q '"backing-filename": "p.vhdx"' ||
        fail "$loc: parent not named"
done
yal_check "$T/c.vhdx" "$T/c.raw"
$MK "$T/z.vhdx" --type diff --size $((8 * M)) --parent "$T/p.vhdx" --parent-raw "$T/p.raw" \
    --loc 'relative_path=p.vhdx' --state 6:2 --state 7:3 --state 0:0 --expect "$T/z.raw" || fail vhdxmake
check_reads "$T/z.vhdx" "$T/z.raw"
cmp -n $M "$T/z.raw" "$T/p.raw" || fail "not present block does not read the parent"
# map: the child's sectors at depth 0, the parent's at depth 1
"$DISKIMG" map --output=json "$T/c.vhdx" > "$T/map"
grep -q '"start": 512, "length": 512, "depth": 0' "$T/map" || fail "map depth 0"
grep -q '"start": 0, "length": 512, "depth": 1' "$T/map" || fail "map depth 1"
# the chain to qcow2 and back
ok "$DISKIMG" convert -O qcow2 "$T/c.vhdx" "$T/c.qcow2"
ok "$DISKIMG" compare "$T/c.qcow2" "$T/c.raw"

# the parent changed since: its DataWriteGuid is no longer the linkage
cp "$T/p.vhdx" "$T/p.keep"
python3 "$TOP/tests/tools/vhdxpatch.py" "$T/p.vhdx" hdr.both.data_guid=new
expect_error "parent 'p.vhdx' has data write GUID .* expects" \
    "$DISKIMG" convert -O raw "$T/c.vhdx" "$T/out.raw"
[ ! -e "$T/out.raw" ] || fail "output left"
mv "$T/p.keep" "$T/p.vhdx"
# a missing parent is named; a path out of the folder is refused
mkdir -p "$T/sub"
$MK "$T/sub/m.vhdx" --type diff --size $((8 * M)) --linkage '{11111111-2222-3333-4444-555555555555}' \
    --loc 'relative_path=gone.vhdx' || fail vhdxmake
expect_error "parent 'gone.vhdx' is missing" "$DISKIMG" convert -O raw "$T/sub/m.vhdx" "$T/out.raw"
$MK "$T/sub/o.vhdx" --type diff --size $((8 * M)) --parent "$T/p.vhdx" --loc 'relative_path=..\p.vhdx' \
    $C --expect "$T/o.raw" --parent-raw "$T/p.raw" || fail vhdxmake
expect_error "outside|leaves|folder" "$DISKIMG" convert -O raw "$T/sub/o.vhdx" "$T/out.raw"
ok "$DISKIMG" convert --allow-external -O raw "$T/sub/o.vhdx" "$T/out.raw"
cmp "$T/out.raw" "$T/o.raw" || fail "--allow-external reads wrong"
# info and check do not need the parent
ok "$DISKIMG" info "$T/sub/m.vhdx" > /dev/null
ok "$DISKIMG" check "$T/sub/m.vhdx" > /dev/null

# 4096-byte sectors, block sizes, fixed disks, every state in a dynamic disk
W="--write 0:4096:0x11 --write $((3 * M)):8192:0x22 --write $((10 * M - 4096)):4096:0x33"
while read -r args; do
    $MK "$T/s.vhdx" --size $((10 * M)) $args $W --expect "$T/s.raw" || fail "vhdxmake $args"
    check_reads "$T/s.vhdx" "$T/s.raw"
    yal_check "$T/s.vhdx" "$T/s.raw"
done <<EOF
--sector 4096
--sector 4096 --psector 512 --block $((2 * M))
--block $((32 * M))
--type fixed --block $((2 * M))
--type fixed --sector 4096
--state 0:2 --state 1:3 --state 2:1 --state 4:6
EOF
# 4096-byte sectors in a differencing disk: bitmap bits are 4 KiB each
$MK "$T/p4.vhdx" --size $((10 * M)) --sector 4096 $W --expect "$T/p4.raw" || fail vhdxmake
$MK "$T/c4.vhdx" --type diff --sector 4096 --size $((10 * M)) --parent "$T/p4.vhdx" \
    --parent-raw "$T/p4.raw" --loc relative_path=p4.vhdx --loc 'absolute_win32_path=C:\VMs\p4.vhdx' \
    --write 4096:4096:0x44 \
    --write $((3 * M + 4096)):4096:0x55 --expect "$T/c4.raw" || fail vhdxmake
check_reads "$T/c4.vhdx" "$T/c4.raw"
yal_check "$T/c4.vhdx" "$T/c4.raw"

# past the first chunk (4 GiB with 1 MiB blocks and 512-byte sectors): the
# sector bitmap entry sits between payload entries 4095 and 4096
G=$((4096 * M))
$MK "$T/bp.vhdx" --size $((G + 64 * M)) --write 0:512:1 --write $((G + M)):4096:0x55 \
    --write $((G - M)):4096:0x56 --expect "$T/bp.raw" || fail vhdxmake
ok "$DISKIMG" compare "$T/bp.vhdx" "$T/bp.raw"
$MK "$T/bc.vhdx" --type diff --size $((G + 64 * M)) --parent "$T/bp.vhdx" --parent-raw "$T/bp.raw" \
    --loc relative_path=bp.vhdx --write $((G + M + 4096)):4096:0x66 \
    --write $((G - M + 512)):512:0x67 --expect "$T/bc.raw" || fail vhdxmake
ok "$DISKIMG" compare "$T/bc.vhdx" "$T/bc.raw"
ok "$DISKIMG" convert -O raw "$T/bc.vhdx" "$T/got.raw"
for o in $((G - M)) $((G + M)); do
    cmp -i $o:$o -n $M "$T/got.raw" "$T/bc.raw" || fail "chunk 1 at $o reads wrong"
done
echo ok
