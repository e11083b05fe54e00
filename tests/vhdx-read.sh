#!/bin/bash
# VHDX images qemu-img writes, with every creation option (subformat
# dynamic and fixed, block_size 1M/8M/32M/256M, log_size, block_state_zero
# on and off, odd virtual sizes) and data, zeros and discards qemu-io wrote,
# read identically: convert -O raw equals qemu-img's conversion and
# qemu-img compare finds it equal to the image; info (JSON key by key, and
# the human text) and check are qemu-img's; compare agrees with qemu-img on
# equal and different images.  qemu-img 7.2 maps a vhdx as one data extent
# without offsets; ours comes from the BAT, so it is checked against the
# content instead: extents cover the disk in order, zero extents read as
# zeros, and data extents hold the guest bytes at their offset in the file.
# libvhdi's vhdimount reads what we read.  A 200 GiB sparse VHDX converts
# in well under a second (only its BAT is walked).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3

same_as_qemu() {   # same_as_qemu CMD ARGS...
    local qrc=0 drc=0 cmd=$1; shift
    qemu-img $cmd "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" $cmd "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "$cmd $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "$cmd $*: output differs from qemu-img"; }
}
# same_info_map IMAGE RAW: info --output=json has qemu-img's keys and
# values; our map (qemu-img 7.2 has none worth comparing) against the
# content: extents in order over the whole disk, zero extents read as
# zeros, data extents hold the guest bytes at their offset in the file
same_info_map() {
    qemu-img info --output=json "$1" > "$T/qi.json" || fail "qemu-img info $1"
    ok "$DISKIMG" info --output=json "$1" > "$T/di.json"
    ok "$DISKIMG" map --output=json "$1" > "$T/map.json"
    python3 - "$T/qi.json" "$T/di.json" "$T/map.json" "$2" "$1" <<'PY' || fail "info or map of $1"
import json, sys
q, d = (json.load(open(p)) for p in sys.argv[1:3])
if q != d:
    for k in sorted(set(q) | set(d)):
        if q.get(k) != d.get(k):
            print('info key %s: qemu-img %r, diskimg %r' % (k, q.get(k), d.get(k)))
    sys.exit(1)
m = json.load(open(sys.argv[3]))
raw = open(sys.argv[4], 'rb'); img = open(sys.argv[5], 'rb')
size = raw.seek(0, 2)
pos = 0
for e in m:
    assert e['start'] == pos, 'map: gap at %d' % pos
    raw.seek(e['start']); want = raw.read(e['length'])
    if e['zero']:
        assert want == bytes(len(want)), 'map: zero extent at %d holds data' % pos
    if e['data'] and 'offset' in e:
        img.seek(e['offset']); got = img.read(e['length'])
        if e['zero']:
            assert got == bytes(len(got)), 'map: zero data extent at %d' % pos
        else:
            assert got == want, 'map: extent at %d: file bytes at %d differ' % (pos, e['offset'])
    pos += e['length']
assert pos == size, 'map ends at %d of %d' % (pos, size)
PY
    same_as_qemu info "$1"
}

n=0
check_image() {   # check_image IMAGE WHAT
    local img=$1 what=$2
    qemu-img convert -O raw "$img" "$T/q.raw" || fail "qemu-img convert $what"
    ok "$DISKIMG" convert -O raw "$img" "$T/d.raw"
    cmp "$T/q.raw" "$T/d.raw" || fail "$what: content differs from qemu-img's"
    qcompare "$img" "$T/d.raw"
    same_info_map "$img" "$T/d.raw"
    same_as_qemu check "$img"
    same_as_qemu check --output=json "$img"
    same_as_qemu compare -F raw "$img" "$T/q.raw"
    # a difference in the last data qemu-io wrote
    cp "$T/q.raw" "$T/q2.raw"
    printf '\x77' | dd of="$T/q2.raw" bs=1 seek=$((3 * 1048576 + 5)) conv=notrunc status=none
    same_as_qemu compare -F raw "$img" "$T/q2.raw"
}

# each option value at least once: subformat, block_size, log_size,
# block_state_zero, sizes that are not whole blocks (or MiB)
while read -r sub bs zero log size; do
    n=$((n + 1))
    img=$T/$n.vhdx
    o=subformat=$sub
    [ $bs = - ] || o=$o,block_size=$bs
    [ $zero = - ] || o=$o,block_state_zero=$zero
    [ $log = - ] || o=$o,log_size=$log
    qemu-img create -q -f vhdx -o $o "$img" $size || fail "create $o"
    qemu-io -f vhdx -c "write -P 0x5a 0 4k" -c "write -P 0x11 1536k 2M" \
        -c "write -z 2M 64k" -c "discard 3M 1M" -c "write -P 0x22 3M 4k" \
        -c "write -P 0x33 9M 512" "$img" > /dev/null || fail "qemu-io $o"
    check_image "$img" "$o size=$size"
done <<EOF
dynamic 1M off 1M $((10 * 1048576 + 512))
dynamic 8M on 2M 33M
dynamic - - - $((20 * 1048576 + 4096 * 3))
dynamic 256M on 3M 17M
fixed 1M - - $((12 * 1048576 + 4096))
fixed 32M - 2M $((12 * 1048576 + 4096))
fixed 256M - - 10M
EOF

# libvhdi reads the same disks
for i in 1 4 6; do
    qemu-img convert -O raw "$T/$i.vhdx" "$T/q.raw"
    yal_read "$T/$i.vhdx" "$T/yal.raw" vhdx
    cmp "$T/q.raw" "$T/yal.raw" || fail "vhdimount reads $i.vhdx differently"
done

# -f vhdx names the format; a .vhdx is probed as vhdx
ok "$DISKIMG" convert -f vhdx -O raw "$T/1.vhdx" "$T/f.raw"
"$DISKIMG" info "$T/1.vhdx" | grep -q '^file format: vhdx$' || fail "not probed as vhdx"

# a 200 GiB sparse disk with one block of data: only the BAT is walked
qemu-img create -q -f vhdx "$T/big.vhdx" 200G
qemu-io -f vhdx -c "write -P 7 100G 1M" "$T/big.vhdx" > /dev/null
start=$(date +%s%N)
ok "$DISKIMG" convert -O raw "$T/big.vhdx" "$T/big.raw"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
limit=1000
asan_build && limit=3000
[ $ms -lt $limit ] || fail "200 GiB sparse VHDX took $ms ms"
[ "$(alloc "$T/big.raw")" -le $((4 * 1048576)) ] || fail "big.raw is not sparse"
ok "$DISKIMG" compare "$T/big.vhdx" "$T/big.raw"
echo "ok (200 GiB sparse in $ms ms)"
