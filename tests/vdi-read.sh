#!/bin/bash
# VDI input: images qemu-img writes (dynamic, static, odd sizes) with data
# qemu-io wrote read identically (convert, map --output=json and human,
# compare, info's size and cluster-size, check's exit status and text);
# images laid out from VirtualBox's header (tests/tools/vdimake.py): 1.0
# and old version 0 headers, 4 KiB and 4 MiB blocks, block extra data, blocks out of order, 0xfffffffe zero
# blocks, differencing images whose parent is found by its UUID beside
# them (and refused, naming the UUID, when it is not there).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
MK="python3 $TOP/tests/tools/vdimake.py"
M=$((1 << 20))

same_as_qemu() {   # same_as_qemu CMD ARGS...
    local qrc=0 drc=0 cmd=$1; shift
    qemu-img $cmd "$@" > "$T/q.out" 2>"$T/q.err" || qrc=$?
    "$DISKIMG" $cmd "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "$cmd $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "$cmd $*: output differs from qemu-img"; }
}

n=0
for o in static=off static=on; do
    for size in 1M 10M 10000000 33M; do
        n=$((n + 1)); img=$T/$n.vdi
        qemu-img create -q -f vdi -o $o "$img" $size
        qemu-io -f vdi -c "write -P 0x5a 0 4k" -c "write -P 0x11 512k 1536k" "$img" > /dev/null 2>&1 || true
        qemu-img convert -O raw "$img" "$T/q.raw"
        ok "$DISKIMG" convert -O raw "$img" "$T/d.raw"
        cmp "$T/q.raw" "$T/d.raw" || fail "$o $size: content"
        same_as_qemu map --output=json "$img"
        same_as_qemu map "$img"
        same_as_qemu compare "$img" "$T/q.raw"
        same_as_qemu check "$img"
        "$DISKIMG" info --output=json "$img" | grep -q '"cluster-size": 1048576' || fail "cluster-size"
        [ "$(qemu-img info --output=json "$img" | grep virtual-size)" = \
          "$("$DISKIMG" info --output=json "$img" | grep virtual-size)" ] || fail "$o $size: virtual size"
    done
done

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
W="0:4096:0x21 $((3 * M + 512)):8192:0x22 $((9 * M)):$M:0x23"
for v in 1.1 1.0 0; do
    for bs in 4096 $M $((4 * M)); do
        $MK "$T/v.vdi" --size $((10 * M)) --version $v --block $bs --reverse \
            $(for w in $W; do echo --write $w; done) || fail vdimake
        expect "$T/v.raw" $((10 * M)) $W
        ok "$DISKIMG" convert -O raw "$T/v.vdi" "$T/got.raw"
        cmp "$T/got.raw" "$T/v.raw" || fail "version $v block $bs: content"
        "$DISKIMG" check "$T/v.vdi" > /dev/null || fail "check $v $bs"
    done
done
# block extra data (cbBlockExtra: VirtualBox writes none, the header allows
# up to 1 MiB) sits before each block and is never guest data: the filler
# vdimake puts there (0xee) must not appear in the output.  Three blocks,
# allocated last first (block 3 first in the file, then 1, then 0), one
# write across the boundary of blocks 0 and 1: a reader that skips the
# extra data but strides by the block size alone reads blocks 1 and 0 from
# the wrong place.  (qemu-img refuses any block extra data.)
for extra in 512 $((64 << 10)); do
    $MK "$T/x.vdi" --size $((2 * M)) --block 4096 --extra $extra --reverse \
        --write 3584:1024:0x5a --write 12288:512:0x6b || fail vdimake
    expect "$T/x.raw" $((2 * M)) 3584:1024:0x5a 12288:512:0x6b
    ok "$DISKIMG" convert -O raw "$T/x.vdi" "$T/got.raw"
    cmp "$T/got.raw" "$T/x.raw" || fail "block extra $extra: content"
    # data at 512 + the map (512 entries, 2048 bytes); block 3, 1, 0 in turn
    st=$((extra + 4096))
    "$DISKIMG" map --output=json "$T/x.vdi" > "$T/x.map"
    for want in "0 $((2560 + 2 * st + extra))" "4096 $((2560 + st + extra))" \
                "12288 $((2560 + extra))"; do
        set -- $want
        grep -q "\"start\": $1, \"length\": 4096, .*\"data\": true, \"offset\": $2}" "$T/x.map" ||
            { cat "$T/x.map"; fail "block extra $extra: block at $1 not mapped at $2"; }
    done
done
# zero blocks and a differencing image over a parent beside it
P="0:$((2 * M)):0x31 $((5 * M)):$M:0x32"
$MK "$T/parent.vdi" --size $((8 * M)) $(for w in $P; do echo --write $w; done) || fail vdimake
$MK "$T/decoy.vdi" --size $((8 * M)) --write 0:512:0x99 || fail vdimake
C="$((M + 4096)):4096:0x41 $((6 * M)):512:0x42"
$MK "$T/child.vdi" --size $((8 * M)) --type 4 --parent "$T/parent.vdi" --zero 5 \
    $(for w in $C; do echo --write $w; done) || fail vdimake
# a VDI block is whole: a block the child has hides the parent's block
# (VirtualBox copies the parent's bytes in when it allocates one)
expect "$T/child.raw" $((8 * M)) $P "$((M)):$M:0" "$((5 * M)):$M:0" "$((6 * M)):$M:0" $C
ok "$DISKIMG" convert -O raw "$T/child.vdi" "$T/got.raw"
cmp "$T/got.raw" "$T/child.raw" || fail "differencing VDI reads wrong"
"$DISKIMG" info --output=json "$T/child.vdi" | grep -q '"format": "vdi"' || fail "info"
"$DISKIMG" map --output=json "$T/child.vdi" | grep -q '"depth": 1' || fail "map: no parent layer"
rm "$T/parent.vdi"
expect_error "no parent with UUID [0-9a-f-]+ among the .vdi files beside it" \
    "$DISKIMG" convert -O raw "$T/child.vdi" "$T/o.raw"
echo ok
