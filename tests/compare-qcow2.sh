#!/bin/bash
# compare with qcow2 images (made by qemu-img/qemu-io): backing chains
# against their flattened copies, compressed images, images of different
# virtual sizes, strict mode across formats; messages and exit statuses as
# qemu-img compare; a damaged table is exit 3, a read failure exit 4.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io

qemu-img create -q -f qcow2 "$T/probe.qcow2" 1M
# a qcow2 image qemu-img made must be readable: a failure here is a failure
"$DISKIMG" map "$T/probe.qcow2" > /dev/null 2> "$T/probe.err" ||
    { cat "$T/probe.err" >&2; fail "map cannot read a qcow2 image qemu-img made"; }

same_as_qemu() {
    local qrc=0 drc=0
    qemu-img compare "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" compare "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: compare $*"; }
    [ $qrc = $drc ] || { cat "$T/d.out" "$T/d.err"; fail "compare $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" || fail "compare $*: output differs from qemu-img"
}
qio() { qemu-io "$@" > /dev/null || fail "qemu-io $*"; }
poke() { printf "\\$(printf %03o "$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

cd "$T" || fail "cd"
# chain base 4M <- mid 6M <- top 8M (whole clusters written)
qemu-img create -q -f qcow2 base.qcow2 4M
qio -c "write -P 1 0 1M" -c "write -z 1M 512k" -c "write -P 2 3M 64k" base.qcow2
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 mid.qcow2 6M
qio -c "write -P 3 512k 64k" -c "write -z 2M 128k" -c "write -P 6 5M 64k" mid.qcow2
qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2 8M
qio -c "write -P 4 0 64k" -c "write -z 64k 64k" -c "write -P 7 7M 64k" top.qcow2
qemu-img convert -O raw top.qcow2 flat.raw
qemu-img convert -O qcow2 top.qcow2 flat.qcow2
qemu-img convert -c -O qcow2 top.qcow2 flatc.qcow2
for pair in "top.qcow2 flat.raw" "flat.raw top.qcow2" "top.qcow2 flat.qcow2" "flatc.qcow2 top.qcow2" \
            "-s top.qcow2 flat.raw" "-s flat.qcow2 top.qcow2" "-s flatc.qcow2 flat.qcow2" \
            "-s flat.qcow2 flat.qcow2" "top.qcow2 mid.qcow2" "mid.qcow2 top.qcow2" "base.qcow2 mid.qcow2" \
            "-s mid.qcow2 top.qcow2" "-f qcow2 -F raw top.qcow2 flat.raw" "-q top.qcow2 flat.raw"; do
    same_as_qemu $pair
done
same_as_qemu top.qcow2 flat.raw
grep -qx "Images are identical." "$T/d.out" || fail "chain and its flattened copy differ"

# a byte that only the bottom of the chain shows, changed in the flat copy
for off in 100 $((1024 * 1024 - 1)) $((3 * 1024 * 1024 + 4000)) $((64 * 1024 + 5)) $((7 * 1024 * 1024 + 65535)); do
    cp flat.raw x.raw; poke x.raw $off 200
    same_as_qemu top.qcow2 x.raw
    same_as_qemu x.raw flatc.qcow2
    grep -qx "Content mismatch at offset $((off / 512 * 512))!" "$T/d.out" || fail "offset $off: $(cat "$T/d.out")"
done
# the chain changes underneath: writing to base shows through mid and top
cp base.qcow2 base.orig
qio -c "write -P 9 3200k 4k" base.qcow2
same_as_qemu top.qcow2 flat.raw
grep -qx "Content mismatch at offset $((3200 * 1024))!" "$T/d.out" || fail "change in base: $(cat "$T/d.out")"
cp base.orig base.qcow2

# generated content converted by qemu-img (zeros left unallocated), with
# bytes changed in data and in zero ranges of the raw source
gen -s 31 -m 4K -M 512K 12M g.raw
qemu-img convert -O qcow2 -o cluster_size=16k g.raw g.qcow2
same_as_qemu g.raw g.qcow2
same_as_qemu -s g.raw g.qcow2
for i in 1 2 3 4 5 6; do
    cp g.raw h.raw; poke h.raw $(( (RANDOM * 32768 + RANDOM) % (12 * 1024 * 1024) )) 1
    same_as_qemu g.qcow2 h.raw
done
# a larger virtual size with a zero tail, then with data in the tail
qemu-img create -q -f qcow2 -b g.qcow2 -F qcow2 big.qcow2 20M
same_as_qemu g.raw big.qcow2
grep -qx "Warning: Image size mismatch!" "$T/d.out" || fail "size warning"
same_as_qemu -s big.qcow2 g.raw
qio -c "write -P 5 15M 64k" big.qcow2
same_as_qemu big.qcow2 g.qcow2

# a damaged L1 entry (the L2 table for guest 4M..6M far past the end of the
# file; 4K clusters, so one L1 entry maps 2M): block status fails, exit 3,
# the message names the image and the offset
qemu-img convert -O qcow2 -o cluster_size=4k flat.raw bad.qcow2
l1=$(od -An -t u8 --endian=big -j 40 -N 8 bad.qcow2 | tr -d ' ')
printf '\200\0\0\0\100\0\0\0' | dd of=bad.qcow2 bs=1 seek=$((l1 + 16)) conv=notrunc status=none
rc=0; "$DISKIMG" compare flat.raw bad.qcow2 > out 2> err || rc=$?
[ $rc = 3 ] || { cat out err; fail "damaged L1: exit $rc, expected 3"; }
grep -q "bad.qcow2" err && grep -q "offset" err || fail "damaged L1 message: $(cat err)"
[ -s out ] && fail "damaged L1 printed a verdict: $(cat out)"
# a difference before the damaged range still wins (it comes first)
cp flat.raw y.raw; poke y.raw 10 1
rc=0; "$DISKIMG" compare y.raw bad.qcow2 > out 2> err || rc=$?
[ $rc = 1 ] && grep -qx "Content mismatch at offset 0!" out || fail "mismatch before damage: exit $rc $(cat out err)"
# a read failure: exit 4
rc=0; DISKIMG_FAULT=read:12+:EIO "$DISKIMG" compare flat.qcow2 flat.raw > out 2> err || rc=$?
[ $rc = 4 ] && grep -q "Input/output error" err || fail "read failure: exit $rc $(cat err)"
exit 0
