#!/bin/bash
# VDI output: convert -O vdi (dynamic, static=on) passes qemu-img compare
# and qemu-img check, has qemu-img's file size and no more allocation than
# qemu-img's + 5%; create -f vdi prints qemu-img's line and makes the same
# file size; measure -O vdi's required size is the file convert writes;
# resize grows (moving blocks when the map needs room) and shrinks with
# --shrink, the content kept and qemu-img check clean; check matches
# qemu-img check's exit status and messages on damaged maps.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
M=$((1 << 20))

qemu-img create -q -f qcow2 "$T/src.qcow2" 50M
qemu-io -c "write -P 0x33 1M 3M" -c "write -P 0x44 20M 64k" -c "write -P 0x55 52424704 4k" \
    "$T/src.qcow2" > /dev/null || fail qemu-io
for o in static=off static=on; do
    rm -f "$T/o.vdi" "$T/q.vdi"
    ok "$DISKIMG" convert -O vdi -o $o "$T/src.qcow2" "$T/o.vdi"
    qemu-img convert -O vdi -o $o "$T/src.qcow2" "$T/q.vdi"
    qemu-img compare "$T/src.qcow2" "$T/o.vdi" > /dev/null || fail "$o: compare"
    qemu-img check "$T/o.vdi" > /dev/null || fail "$o: qemu-img check"
    [ $(stat -c %s "$T/o.vdi") = $(stat -c %s "$T/q.vdi") ] || fail "$o: file size"
    [ $(alloc "$T/o.vdi") -le $(( $(alloc "$T/q.vdi") * 105 / 100 + 4096 )) ] || fail "$o: allocation"
    req=$("$DISKIMG" measure -O vdi -o $o --output=json "$T/src.qcow2" | sed -n 's/.*"required": \([0-9]*\).*/\1/p')
    [ "$req" = $(stat -c %s "$T/o.vdi") ] || fail "$o: measure says $req"
    "$DISKIMG" check "$T/o.vdi" > /dev/null || fail "$o: check"
    # VDI -> qcow2 -> vmdk -> raw
    ok "$DISKIMG" convert -O qcow2 "$T/o.vdi" "$T/rt.qcow2"
    ok "$DISKIMG" convert -O vmdk "$T/rt.qcow2" "$T/rt.vmdk"
    ok "$DISKIMG" convert -O raw "$T/rt.vmdk" "$T/rt.raw"
    qemu-img compare "$T/src.qcow2" "$T/rt.raw" > /dev/null || fail "$o: round trip"
done
for o in "" "-o static=on"; do
    for size in 1M 10M 10000000 100M; do
        rm -f "$T/c.vdi" "$T/q.vdi"
        "$DISKIMG" create -f vdi $o "$T/c.vdi" $size | sed "s|$T/c.vdi|X|" > "$T/d1" || fail create
        qemu-img create -f vdi $o "$T/q.vdi" $size | sed "s|$T/q.vdi|X|" > "$T/q1"
        diff "$T/q1" "$T/d1" || fail "create $o $size: line"
        [ $(stat -c %s "$T/c.vdi") = $(stat -c %s "$T/q.vdi") ] || fail "create $o $size: file size"
        qemu-img check "$T/c.vdi" > /dev/null || fail "create $o $size: check"
    done
done

# resize: grow within the map's sector, grow past it (a block moves), shrink
for o in static=off static=on; do
    ok "$DISKIMG" convert -O vdi -o $o "$T/src.qcow2" "$T/r.vdi"
    for to in 100M 1G; do
        ok "$DISKIMG" resize "$T/r.vdi" $to
        qemu-img info "$T/r.vdi" | grep -q "($(numfmt --from=iec $to) bytes)" || fail "$o resize $to: size"
        qemu-img check "$T/r.vdi" > /dev/null || fail "$o resize $to: qemu-img check"
        ok "$DISKIMG" compare "$T/src.qcow2" "$T/r.vdi" > /dev/null
    done
    qemu-io -f vdi -c "write -P 0x77 900M 1M" "$T/r.vdi" > /dev/null || fail "qemu-io"
    ok "$DISKIMG" convert -O raw "$T/r.vdi" "$T/r.raw"
    qemu-img convert -O raw "$T/r.vdi" "$T/rq.raw"
    cmp "$T/r.raw" "$T/rq.raw" || fail "$o: after resize"
    expect_error "--shrink" "$DISKIMG" resize "$T/r.vdi" 10M
    ok "$DISKIMG" resize --shrink "$T/r.vdi" 10M
    qemu-img check "$T/r.vdi" > /dev/null || fail "$o shrink: check"
    qemu-img compare "$T/src.qcow2" "$T/r.vdi" 2>&1 | grep -q "Images are identical" && fail "shrink kept all"
done

# check: damaged maps, as qemu-img check sees them
same_check() {   # same_check IMAGE
    local qrc=0 drc=0
    qemu-img check "$1" > "$T/q.out" 2> "$T/q.err" || qrc=$?
    "$DISKIMG" check "$1" > "$T/d.out" 2> "$T/d.err" || drc=$?
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "check $1: exit $drc, qemu-img $qrc"; }
    grep ERROR "$T/q.err" | sort > "$T/qe"; grep ERROR "$T/d.err" | sed 's/^diskimg: [^:]*: //' | sort > "$T/de"
    diff "$T/qe" "$T/de" || fail "check $1: messages differ from qemu-img's"
    diff "$T/q.out" "$T/d.out" || fail "check $1: summary differs from qemu-img's"
    qemu-img check --output=json "$1" 2>/dev/null | sed "s|$T/||" > "$T/q.json"
    "$DISKIMG" check --output=json "$1" 2>/dev/null | sed "s|$T/||" > "$T/d.json"
    diff "$T/q.json" "$T/d.json" || fail "check $1: JSON differs from qemu-img's"
}
ok "$DISKIMG" convert -O vdi "$T/src.qcow2" "$T/k.vdi"
cp "$T/k.vdi" "$T/k1.vdi"; printf '\x00\x00\x00\x00' | dd of="$T/k1.vdi" bs=1 seek=$((512 + 4)) conv=notrunc status=none
same_check "$T/k1.vdi"       # two entries name block 0, count mismatch
cp "$T/k.vdi" "$T/k2.vdi"; printf '\x00\x10\x00\x00' | dd of="$T/k2.vdi" bs=1 seek=512 conv=notrunc status=none
same_check "$T/k2.vdi"       # index too large
cp "$T/k.vdi" "$T/k3.vdi"; printf '\x09' | dd of="$T/k3.vdi" bs=1 seek=388 conv=notrunc status=none
same_check "$T/k3.vdi"       # allocated count
same_check "$T/k.vdi"
echo ok
