#!/bin/bash
# convert -n into existing vpc (VHD fixed, dynamic, differencing) and vdi
# (dynamic, static, differencing) images.  Sources of every kind (raw with
# data and zero runs, qcow2 with zero clusters, dynamic VHD, VDI, a raw
# file that ends inside a sector) go into targets made by qemu-img and by
# diskimg, empty and holding old data over every block, larger than the
# source.  Each result must keep its format, subformat and size, read as
# the source (qemu-img compare, which also reads the target's range past
# the source: it must hold what it held before), pass qemu-img check
# (vdi) and read the same through libyal's vhdimount (VHD).  Zero runs
# must not allocate blocks in an empty dynamic target.  Then the
# differencing targets (their parents opened under the reference rules),
# the refusals (nothing written), and a write or sync failing part-way:
# exit 1 and a target that still opens and checks clean.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"
M=$((1024 * 1024))

# sources: 7 MiB with data, zero runs and holes in and across blocks
gen -s 13 -m 4K -M 512K 7M src.raw
qemu-io -f raw -c 'write -z 2M 2M' -c 'write -P 0x5a 2560k 4k' src.raw >/dev/null
head -c $((5 * M + 1000)) src.raw > odd.raw
qemu-img convert -q -f raw -O qcow2 src.raw src.qcow2
qemu-io -c 'write -z 4M 1M' src.qcow2 >/dev/null
qemu-img convert -q -f qcow2 -O raw src.qcow2 srcq.raw
qemu-img convert -q -f raw -O vpc -o force_size=on src.raw src.vhd
qemu-img convert -q -f raw -O vdi src.raw src.vdi
SOURCES="src.raw:raw:src.raw odd.raw:raw:odd.raw src.qcow2:qcow2:srcq.raw src.vhd:vpc:src.raw src.vdi:vdi:src.raw"

# target KIND NAME OLD: a 9 MiB target made by qemu-img (OLD=1: data in
# every block, so that -n must overwrite, zero and keep)
target() {
    local fmt=${1%%:*} opts=${1#*:}
    qemu-img create -q -f "$fmt" -o "$opts" "$2" 9M || fail "create $2"
    [ "$3" = 1 ] && { qemu-io -f "$fmt" -c 'write -P 0x77 0 9M' "$2" >/dev/null || fail "fill $2"; }
    return 0
}

# verify TGT FMT SRC_RAW SAVED_TAIL: reads as the source, the rest as before
verify() {
    local tgt=$1 fmt=$2 want=$3 before=$4 n
    n=$(stat -c %s "$want")
    qemu-img convert -q -f "$fmt" -O raw "$tgt" got.raw || fail "$tgt: qemu-img cannot read it"
    cmp -n "$n" got.raw "$want" || fail "$tgt ($fmt) does not read as $want"
    cmp -i "$n:$n" got.raw "$before" || fail "$tgt: its bytes past the source changed"
    if [ "$fmt" = vdi ]; then
        qemu-img check -q "$tgt" || fail "$tgt: qemu-img check"
    else
        qemu-img compare -q -f raw -F "$fmt" got.raw "$tgt" || fail "$tgt: compare"
        if [ "${YAL:-1}" = 1 ] && [ "${5:-}" = yal ]; then
            ( yal_read "$tgt" yal.raw vpc ); rc=$?
            [ $rc = 77 ] && YAL=0
            [ $rc = 0 ] && { cmp -n "$n" yal.raw "$want" || fail "$tgt: vhdimount reads it differently"; }
            [ $rc = 0 ] || [ $rc = 77 ] || fail "$tgt: vhdimount"
        fi
    fi
    ok "$DISKIMG" check -f "$fmt" "$tgt" > /dev/null
}

info_of() { qemu-img info --output=json "$1" | grep -E '"(format|virtual-size)"' | tr -d ' \n'; }

# every source into every kind of target, empty or holding old data by
# turns (each source meets both over the four kinds)
n=0
k=0
for kind in vpc:subformat=dynamic vpc:subformat=fixed vdi:static=off vdi:static=on; do
    fmt=${kind%%:*}
    k=$((k + 1))
    i=0
    for spec in $SOURCES; do
        IFS=: read -r src sfmt want <<< "$spec"
        i=$((i + 1))
        for old in $(( (i + k) % 2 )); do
            n=$((n + 1))
            # (the same target each time: made once, then copied)
            if [ ! -f made.$k.$old ]; then
                target "$kind" made.$k.$old $old
                qemu-img convert -q -f "$fmt" -O raw made.$k.$old before.$k.$old.raw
                info_of made.$k.$old > info.$k
            fi
            cp made.$k.$old t.$fmt
            ok "$DISKIMG" convert -n -f "$sfmt" -O "$fmt" "$src" t.$fmt
            [ "$(info_of t.$fmt)" = "$(cat info.$k)" ] || fail "$kind from $src: format or size changed"
            y=; [ "$src" = odd.raw ] && y=yal
            verify t.$fmt "$fmt" "$want" before.$k.$old.raw $y
            # an empty dynamic target: zero runs allocate nothing (the
            # source's 2 MiB of zeros at 2M..4M leave a VHD block out)
            if [ $old = 0 ] && [ "$src" = src.qcow2 ] && [ "$kind" = vpc:subformat=dynamic ]; then
                qemu-img convert -q -f qcow2 -O vpc src.qcow2 new.vhd
                [ "$(alloc t.vpc)" -le $(( $(alloc new.vhd) + 4096 )) ] ||
                    fail "vpc -n allocates more than a new image ($(alloc t.vpc))"
            fi
        done
    done
done

# our own targets, written twice (the second run overwrites the first)
for o in "vpc subformat=dynamic" "vpc subformat=fixed,force_size=on" "vdi static=off" "vdi static=on"; do
    set -- $o
    ok "$DISKIMG" create -q -f "$1" -o "$2" own.$1 8M
    ok "$DISKIMG" convert -n -O "$1" src.qcow2 own.$1
    qemu-img convert -q -f "$1" -O raw own.$1 before.raw
    ok "$DISKIMG" convert -n -O "$1" odd.raw own.$1
    verify own.$1 "$1" odd.raw before.raw
done

# differencing targets: the parent shows through where the target has
# nothing; zeros of the source must hide it (qemu-img reads neither
# format's parent, so diskimg compare is the judge here)
MK="python3 $TOP/tests/tools/vhdmake.py"
qemu-img create -q -f vpc -o force_size=on p.vhd 8M
qemu-io -f vpc -c 'write -P 0x33 0 8M' p.vhd >/dev/null || fail "p.vhd"
$MK c.vhd --type diff --size $((8 * M)) --block $M --parent p.vhd --loc 'W2ru:.\p.vhd' \
    --write 512:512:0x44 --write $((3 * M)):4096:0x55 || fail vhdmake
ok "$DISKIMG" convert -q -n -O vpc odd.raw c.vhd
head -c $((8 * M)) /dev/zero | tr '\0' '\063' > want.raw
dd if=odd.raw of=want.raw conv=notrunc status=none
ok "$DISKIMG" compare c.vhd want.raw > /dev/null
ok "$DISKIMG" check c.vhd > /dev/null
MK="python3 $TOP/tests/tools/vdimake.py"
qemu-img create -q -f vdi pv.vdi 8M
qemu-io -f vdi -c 'write -P 0x33 0 8M' pv.vdi >/dev/null || fail "pv.vdi"
$MK cv.vdi --size $((8 * M)) --type 4 --parent pv.vdi --zero 6 --write $((2 * M)):4096:0x44 ||
    fail vdimake
ok "$DISKIMG" convert -q -n -O vdi odd.raw cv.vdi
# (block 6, past the source, keeps its zero entry)
dd if=/dev/zero of=want.raw bs=1M seek=6 count=1 conv=notrunc status=none
ok "$DISKIMG" compare cv.vdi want.raw > /dev/null
ok "$DISKIMG" check cv.vdi > /dev/null
# a parent outside the target's folder is refused, as an input's would be
mkdir -p sub
$MK sub/cv.vdi --size $((8 * M)) --type 4 --parent pv.vdi || fail vdimake
python3 "$TOP/tests/tools/vhdmake.py" sub/cx.vhd --type diff --size $((8 * M)) --block $M \
    --parent p.vhd --loc 'W2ru:..\p.vhd' || fail vhdmake
cp sub/cx.vhd cx.before
expect_error 'p.vhd.*(outside|leaves)' "$DISKIMG" convert -n -O vpc odd.raw sub/cx.vhd
cmp sub/cx.vhd cx.before || fail "refused target changed"
expect_error 'no parent' "$DISKIMG" convert -n -O vdi odd.raw sub/cv.vdi

# a VDI whose indexes in use are not 0..count-1 (block 0's data moved to
# slot 2, slot 0 free): new blocks take free slots, never one in use
qemu-img create -q -f vdi gap.vdi 8M
qemu-io -f vdi -c 'write -P 0x61 0 1M' -c 'write -P 0x62 1M 1M' gap.vdi >/dev/null
python3 - gap.vdi <<'PY' || fail "gap.vdi"
import struct, sys
f = open(sys.argv[1], 'r+b')
h = f.read(512)
bmap, data = struct.unpack_from('<II', h, 340)
f.seek(data); blk = f.read(1 << 20)
f.seek(data + 2 * (1 << 20)); f.write(blk)
f.seek(bmap); f.write(struct.pack('<I', 2))
PY
qemu-img check -q gap.vdi || fail "gap.vdi is not clean to begin with"
qemu-img convert -q -f vdi -O raw gap.vdi before.raw
ok "$DISKIMG" convert -n -O vdi odd.raw gap.vdi
verify gap.vdi vdi odd.raw before.raw

# VDI 1.0 and version 0 headers (qemu-img reads neither: diskimg is the
# judge; a version 0 map starts inside the first sector, its data right
# after it)
for v in 1.0 0; do
    python3 "$TOP/tests/tools/vdimake.py" v$v.vdi --size $((8 * M)) --version $v --reverse \
        --write 0:4096:0x21 --write $((5 * M)):1024:0x22 --zero 3 || fail vdimake
    ok "$DISKIMG" convert -q -O raw v$v.vdi before.raw
    ok "$DISKIMG" convert -q -n -O vdi odd.raw v$v.vdi
    ok "$DISKIMG" convert -q -O raw v$v.vdi got.raw
    cmp -n $((5 * M + 1000)) got.raw odd.raw || fail "version $v: does not read as the source"
    cmp -i $((5 * M + 1000)):$((5 * M + 1000)) got.raw before.raw || fail "version $v: past the source"
    ok "$DISKIMG" check v$v.vdi > /dev/null
done

# refusals, nothing written: smaller than the source, damaged
qemu-img create -q -f vdi small.vdi 4M
expect_error 'small.vdi: output file is smaller than input file' \
    "$DISKIMG" convert -n -O vdi src.raw small.vdi
qemu-img create -q -f vpc small.vhd 4M
expect_error 'small.vhd: output file is smaller than input file' \
    "$DISKIMG" convert -n -O vpc src.raw small.vhd
target vdi:static=off bad.vdi 1
printf '\003\000\000\000' | dd of=bad.vdi bs=1 seek=$((512 + 4)) conv=notrunc status=none
cp bad.vdi bad.before
expect_error 'bad.vdi: the image has 1 corruption' "$DISKIMG" convert -n -O vdi src.raw bad.vdi
cmp bad.vdi bad.before || fail "damaged vdi changed"
target vpc:subformat=dynamic bad.vhd 1
printf 'X' | dd of=bad.vhd bs=1 seek=100 conv=notrunc status=none
cp bad.vhd bad.before
expect_error 'bad.vhd: the image has 1 corruption' "$DISKIMG" convert -n -O vpc src.raw bad.vhd
cmp bad.vhd bad.before || fail "damaged vhd changed"
expect_error 'pass -O vpc' "$DISKIMG" convert -n src.raw bad.vhd

# a failure part-way: exit 1, and the target still opens and checks clean
for kind in vpc:subformat=dynamic vdi:static=off; do
    fmt=${kind%%:*}
    target "$kind" f.$fmt 0
    qemu-io -f "$fmt" -c 'write -P 0x66 1M 1M' f.$fmt >/dev/null
    cp f.$fmt f.base
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" convert -n -O "$fmt" src.raw f.$fmt || fail "clean $fmt"
    read -r _ R _ W _ S _ P < "$T/stats"
    [ "$P" -gt 0 ] || fail "$fmt: no zero run of the old data punched"
    for spec in write:$((W / 2)) write:$((W - 1)) write:$W sync:1 sync:$S punch:$P; do
        cp f.base f.$fmt
        expect_error "." env DISKIMG_FAULT=${spec}:EIO "$DISKIMG" convert -n -O "$fmt" src.raw f.$fmt
        qemu-img info f.$fmt > /dev/null || fail "$fmt, $spec failed: qemu-img cannot open it"
        [ "$fmt" = vdi ] && { qemu-img check -q f.$fmt || fail "$fmt, $spec: qemu-img check"; }
        "$DISKIMG" check f.$fmt > /dev/null 2>&1 || fail "$fmt, $spec failed: diskimg check"
        # and a second run completes it
        ok "$DISKIMG" convert -n -O "$fmt" src.raw f.$fmt
        qemu-img compare -q -f raw -F "$fmt" src.raw f.$fmt || fail "$fmt, $spec: the second run"
    done
done
echo "ok ($n conversions into existing images)"
