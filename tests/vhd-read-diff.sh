#!/bin/bash
# VHDs laid out from the specification (tests/tools/vhdmake.py) for what
# qemu-img cannot make: differencing disks whose parent is found through
# each kind of locator (W2ru relative, W2ku absolute -> its last component,
# MacX URL, the header's parent name), sector bitmaps that leave sectors
# clear (zeros in a dynamic disk, the parent's sectors in a differencing
# one, never the garbage stored there), blocks allocated out of order, a
# creator that sizes by current size, odd block sizes; the parent's unique
# id checked; a locator leading out of the folder refused.
. "$(dirname "$0")/lib.sh"
need python3
MK="python3 $TOP/tests/tools/vhdmake.py"
M=$((1 << 20))

# expected content: python writes the same bytes into a raw file
expect() {   # expect OUT SIZE OFF:LEN:B...
    python3 - "$@" <<'PY'
import sys
out, size = sys.argv[1], int(sys.argv[2])
d = bytearray(size)
for w in sys.argv[3:]:
    o, l, b = w.split(':'); o, l = int(o), int(l)
    d[o:o + l] = bytes([int(b, 0)]) * l
open(out, 'wb').write(d)
PY
}
check_reads() {   # check_reads IMAGE EXPECTED
    ok "$DISKIMG" convert -O raw "$1" "$T/got.raw"
    cmp "$T/got.raw" "$2" || fail "$1 reads wrong"
    ok "$DISKIMG" compare "$1" "$2" > /dev/null
}

P="0:$M:0x11 $((3 * M)):4096:0x22 $((7 * M)):$M:0x55"
$MK "$T/p.vhd" --type dynamic --size $((8 * M)) --block $M --reverse \
    $(for w in $P; do echo --write $w; done) || fail vhdmake
expect "$T/p.raw" $((8 * M)) $P
check_reads "$T/p.vhd" "$T/p.raw"
# the bitmap decides: sectors with a clear bit are zeros (0xEE stored there)
"$DISKIMG" map --output=json "$T/p.vhd" | grep -q '"start": 3145728, "length": 4096, .*"data": true' ||
    fail "map does not follow the bitmap"

C="512:512:0x33 $((5 * M)):8192:0x44 $((7 * M + 4096)):4096:0x66"
for loc in 'W2ru:.\p.vhd' 'W2ku:C:\Users\x\p.vhd' 'MacX:file://localhost/p.vhd' none; do
    args=()
    [ "$loc" = none ] && args=(--parent-name 'D:\old\p.vhd') || args=(--loc "$loc")
    $MK "$T/c.vhd" --type diff --size $((8 * M)) --block $M --parent "$T/p.vhd" "${args[@]}" \
        $(for w in $C; do echo --write $w; done) || fail vhdmake
    expect "$T/c.raw" $((8 * M)) $P $C
    check_reads "$T/c.vhd" "$T/c.raw"
    "$DISKIMG" info --output=json "$T/c.vhd" | grep -q '"backing-filename": "p.vhd"' ||
        fail "$loc: parent not named"
done
# map: the child's sectors at depth 0, the rest from the parent at depth 1
"$DISKIMG" map --output=json "$T/c.vhd" > "$T/map"
grep -q '"start": 512, "length": 512, "depth": 0' "$T/map" || fail "map depth 0"
grep -q '"start": 0, "length": 512, "depth": 1' "$T/map" || fail "map depth 1"
# a convert to qcow2 of the chain, back to raw
ok "$DISKIMG" convert -O qcow2 "$T/c.vhd" "$T/c.qcow2"
ok "$DISKIMG" compare "$T/c.qcow2" "$T/c.raw"

# the parent's unique id must be the one recorded
$MK "$T/other.vhd" --type dynamic --size $((8 * M)) --block $M || fail vhdmake
$MK "$T/c2.vhd" --type diff --size $((8 * M)) --block $M --parent "$T/other.vhd" \
    --loc 'W2ru:.\p.vhd' --write 0:512:1 || fail vhdmake
expect_error "parent 'p.vhd' has unique id .*expects" "$DISKIMG" convert -O raw "$T/c2.vhd" "$T/o.raw"
[ ! -e "$T/o.raw" ] || fail "output left"
# a locator out of the folder: refused, not followed
mkdir -p "$T/sub"
$MK "$T/sub/c3.vhd" --type diff --size $((8 * M)) --block $M --parent "$T/p.vhd" \
    --loc 'W2ru:..\p.vhd' --write 0:512:1 || fail vhdmake
expect_error "outside|leaves|allow-external" "$DISKIMG" convert -O raw "$T/sub/c3.vhd" "$T/o.raw"
ok "$DISKIMG" convert --allow-external -O raw "$T/sub/c3.vhd" "$T/o.raw"

# creator 'win ' sizes by current size (not a CHS multiple), 4 KiB and
# 512-byte blocks, a disk that ends inside its last block
for bs in 512 4096 $((2 * M)); do
    W="0:4096:0x77 $((3 * M + 512)):1024:0x78 $((5 * M - 1024)):512:0x79"
    $MK "$T/w.vhd" --type dynamic --size $((5 * M - 512)) --block $bs --no-copy \
        $(for w in $W; do echo --write $w; done) || fail vhdmake
    expect "$T/w.raw" $((5 * M - 512)) $W
    check_reads "$T/w.vhd" "$T/w.raw"
done
# fixed, creator 'win ': probed by its footer
$MK "$T/fx.vhd" --type fixed --size $((3 * M)) --write 4096:4096:0x42 || fail vhdmake
expect "$T/fx.raw" $((3 * M)) 4096:4096:0x42
check_reads "$T/fx.vhd" "$T/fx.raw"
"$DISKIMG" info "$T/fx.vhd" | grep -q "file format: vpc" || fail "fixed VHD not probed"
echo ok
