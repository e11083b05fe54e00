#!/bin/bash
# resize, measure and check on VHDs.  resize: growing a fixed disk (the
# usual Azure chore: exactly the size asked with force_size images, whole
# geometry with qemu's CHS ones), growing a dynamic disk within its BAT's
# sectors and past them (the BAT moves), shrinking with --shrink only;
# content kept (qemu-img compare), qemu-img reads the new size.  measure -O
# vpc: required equals the file our convert writes, fully allocated the
# whole disk.  check: clean images exit 0; a block over the BAT, blocks
# that overlap, a damaged footer copy exit 2 naming the problem.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
M=$((1 << 20))
vsize() { qemu-img info -f vpc --output=json "$1" | sed -n 's/^ *"virtual-size": \([0-9]*\),*$/\1/p'; }

qemu-img create -q -f qcow2 "$T/src.qcow2" 30M
qemu-io -c "write -P 0x33 1M 3M" -c "write -P 0x44 20M 64k" "$T/src.qcow2" > /dev/null || fail qemu-io

# fixed, Azure style: exactly the new size + 512
ok "$DISKIMG" convert -O vpc -o azure=on "$T/src.qcow2" "$T/az.vhd"
ok "$DISKIMG" resize "$T/az.vhd" 64M
[ $(stat -c %s "$T/az.vhd") = $((64 * M + 512)) ] || fail "azure resize: $(stat -c %s "$T/az.vhd")"
[ "$(vsize "$T/az.vhd")" = $((64 * M)) ] || fail "azure resize: size"
qemu-img compare -F vpc "$T/src.qcow2" "$T/az.vhd" > /dev/null || fail "azure resize: content"
# the old footer's sector is now disk and reads as zeros
qemu-img convert -f vpc -O raw "$T/az.vhd" "$T/az.raw"
cmp -i $((30 * M)) -n 512 "$T/az.raw" /dev/zero || fail "old footer left in the disk"
expect_error "--shrink" "$DISKIMG" resize "$T/az.vhd" 32M
ok "$DISKIMG" resize --shrink "$T/az.vhd" 32M
[ $(stat -c %s "$T/az.vhd") = $((32 * M + 512)) ] || fail "azure shrink"
qemu-img compare -F vpc "$T/src.qcow2" "$T/az.vhd" > /dev/null 2>&1 ||
    qemu-img compare -F vpc "$T/src.qcow2" "$T/az.vhd" | grep -q "Images are identical" ||
    fail "azure shrink: content"

# fixed, qemu's CHS sizes: whole geometry, as qemu-img create would give
ok "$DISKIMG" convert -O vpc -o subformat=fixed "$T/src.qcow2" "$T/fx.vhd"
ok "$DISKIMG" resize "$T/fx.vhd" 100M
qemu-img create -q -f vpc -o subformat=fixed "$T/ref.vhd" 100M
[ "$(vsize "$T/fx.vhd")" = "$(vsize "$T/ref.vhd")" ] || fail "CHS resize: $(vsize "$T/fx.vhd") vs $(vsize "$T/ref.vhd")"
qemu-img compare -F vpc "$T/src.qcow2" "$T/fx.vhd" > /dev/null 2>&1; [ $? -le 1 ] || fail "CHS resize content"
ok "$DISKIMG" compare "$T/src.qcow2" "$T/fx.vhd" > /dev/null

# dynamic: within the BAT's sector (30M -> 200M: 100 entries fit 128),
# then past it (-> 2G: 1024 entries)
for to in 200M 2G; do
    ok "$DISKIMG" convert -O vpc "$T/src.qcow2" "$T/dy.vhd"
    ok "$DISKIMG" resize "$T/dy.vhd" $to
    qemu-img create -q -f vpc "$T/ref.vhd" $to
    [ "$(vsize "$T/dy.vhd")" = "$(vsize "$T/ref.vhd")" ] || fail "dynamic resize $to"
    ok "$DISKIMG" compare "$T/src.qcow2" "$T/dy.vhd" > /dev/null
    qemu-img compare -F vpc "$T/src.qcow2" "$T/dy.vhd" > /dev/null 2>&1; [ $? -le 1 ] || fail "qemu compare $to"
    "$DISKIMG" check "$T/dy.vhd" > /dev/null || fail "check after resize $to"
    qemu-io -f vpc -c "write -P 0x66 $((150 * M)) 64k" "$T/dy.vhd" > /dev/null || fail "qemu-io after resize"
    qemu-io -f vpc -c "read -P 0x66 $((150 * M)) 64k" "$T/dy.vhd" | grep -q "read 65536" || fail "read"
    ok "$DISKIMG" convert -O raw "$T/dy.vhd" "$T/dy.raw"
    qemu-img convert -f vpc -O raw "$T/dy.vhd" "$T/dyq.raw"
    cmp "$T/dy.raw" "$T/dyq.raw" || fail "after resize $to and a qemu write: content"
done
ok "$DISKIMG" resize --shrink "$T/dy.vhd" 10M
ok "$DISKIMG" convert -O raw "$T/dy.vhd" "$T/small.raw"
qemu-img convert -f vpc -O raw "$T/dy.vhd" "$T/smallq.raw"
cmp "$T/small.raw" "$T/smallq.raw" || fail "shrunk"

# measure
for o in "" subformat=fixed subformat=fixed,force_size=on; do
    ok "$DISKIMG" convert -O vpc ${o:+-o $o} "$T/src.qcow2" "$T/m.vhd"
    req=$("$DISKIMG" measure -O vpc ${o:+-o $o} --output=json "$T/src.qcow2" | sed -n 's/.*"required": \([0-9]*\).*/\1/p')
    [ "$req" = "$(stat -c %s "$T/m.vhd")" ] || fail "measure $o: required $req, file $(stat -c %s "$T/m.vhd")"
done
full=$("$DISKIMG" measure -O vpc --size 30M --output=json | sed -n 's/.*"fully-allocated": \([0-9]*\).*/\1/p')
[ "$full" = $((512 + 1024 + 512 + 512 + 16 * (2 * M + 512))) ] || fail "measure fully allocated: $full"

# check
ok "$DISKIMG" convert -O vpc "$T/src.qcow2" "$T/c.vhd"
ok "$DISKIMG" check "$T/c.vhd"
cp "$T/c.vhd" "$T/c1.vhd"
printf '\x00\x00\x00\x03' | dd of="$T/c1.vhd" bs=1 seek=1536 conv=notrunc status=none
rc=0; "$DISKIMG" check "$T/c1.vhd" > "$T/out" 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "ERROR: block 0 at 1536 overlaps" "$T/err" || { cat "$T/err"; fail "check: block over the BAT (exit $rc)"; }
cp "$T/c.vhd" "$T/c2.vhd"
# block 1 one sector after block 0
b0=$(od -An -tx1 -j1536 -N4 "$T/c2.vhd" | tr -d ' ')
printf "$(printf '%08x' $((0x$b0 + 1)) | sed 's/../\\x&/g')" | dd of="$T/c2.vhd" bs=1 seek=1540 conv=notrunc status=none
rc=0; "$DISKIMG" check "$T/c2.vhd" > "$T/out" 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "overlap" "$T/err" || { cat "$T/err"; fail "check: overlapping blocks (exit $rc)"; }
cp "$T/c.vhd" "$T/c3.vhd"
printf 'x' | dd of="$T/c3.vhd" bs=1 seek=100 conv=notrunc status=none
rc=0; "$DISKIMG" check "$T/c3.vhd" > "$T/out" 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "footer copy at offset 0 is damaged" "$T/err" || { cat "$T/err"; fail "check: footer copy (exit $rc)"; }
echo ok
