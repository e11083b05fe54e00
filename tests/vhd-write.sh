#!/bin/bash
# VHD output: convert -O vpc (dynamic, fixed, force_size on and off, Azure's
# fixed + force_size = exactly size + 512 bytes) from a qcow2 with data and
# holes; every image passes qemu-img compare against its source, reads the
# same through libyal's vhdimount, and (dynamic) is no larger than
# qemu-img's own output + 5%; zero runs stay holes (fixed) or unallocated
# blocks (dynamic).  create -f vpc prints qemu-img's line and gives the
# virtual size qemu-img gives, for sizes that round to CHS geometry and
# sizes that do not.  azure=on refuses a size that is not a whole MiB.
# Round trips VHD -> qcow2 -> vmdk -> raw keep the content.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
vsize() { qemu-img info -f vpc --output=json "$1" | sed -n 's/^ *"virtual-size": \([0-9]*\),*$/\1/p'; }

qemu-img create -q -f qcow2 "$T/src.qcow2" 50M
qemu-io -c "write -P 0x33 1M 3M" -c "write -P 0x44 20M 64k" -c "write -P 0x55 52424704 4k" \
    "$T/src.qcow2" > /dev/null || fail qemu-io
qemu-img convert -O raw "$T/src.qcow2" "$T/src.raw"
for o in "" subformat=dynamic subformat=fixed subformat=fixed,force_size=on force_size=on \
         subformat=dynamic,force_size=off; do
    rm -f "$T/o.vhd" "$T/q.vhd"
    ok "$DISKIMG" convert -O vpc ${o:+-o $o} "$T/src.qcow2" "$T/o.vhd"
    qemu-img convert -O vpc ${o:+-o $o} "$T/src.qcow2" "$T/q.vhd"
    qemu-img compare -F vpc "$T/src.qcow2" "$T/o.vhd" > "$T/cmp" 2>&1 || { cat "$T/cmp"; fail "$o: compare"; }
    [ "$(vsize "$T/o.vhd")" = "$(vsize "$T/q.vhd")" ] || fail "$o: virtual size $(vsize "$T/o.vhd"), qemu-img $(vsize "$T/q.vhd")"
    [ "$(stat -c %s "$T/o.vhd")" = "$(stat -c %s "$T/q.vhd")" ] || fail "$o: file size differs from qemu-img's"
    [ $(alloc "$T/o.vhd") -le $(( $(alloc "$T/q.vhd") * 105 / 100 + 4096 )) ] ||
        fail "$o: allocates $(alloc "$T/o.vhd"), qemu-img $(alloc "$T/q.vhd")"
    # our reader, and libyal's
    ok "$DISKIMG" convert -O raw "$T/o.vhd" "$T/back.raw"
    cmp -n 52428800 "$T/back.raw" "$T/src.raw" || fail "$o: reads back wrong"
    case $o in *fixed*) fmt=vpc ;; *) fmt= ;; esac
    ( yal_read "$T/o.vhd" "$T/yal.raw" $fmt ) ; rc=$?
    [ $rc = 0 ] && { cmp -n 52428800 "$T/yal.raw" "$T/src.raw" || fail "$o: vhdimount reads it differently"; }
    [ $rc = 0 ] || [ $rc = 77 ] || fail "$o: vhdimount"
    "$DISKIMG" check "$T/o.vhd" > /dev/null || fail "$o: check"
    # VHD -> qcow2 -> vmdk -> raw
    ok "$DISKIMG" convert -O qcow2 "$T/o.vhd" "$T/rt.qcow2"
    ok "$DISKIMG" convert -O vmdk "$T/rt.qcow2" "$T/rt.vmdk"
    ok "$DISKIMG" convert -O raw "$T/rt.vmdk" "$T/rt.raw"
    cmp -n 52428800 "$T/rt.raw" "$T/src.raw" || fail "$o: round trip"
done
# zero runs: holes in a fixed image, unallocated blocks in a dynamic one
ok "$DISKIMG" convert -O vpc -o subformat=fixed "$T/src.qcow2" "$T/fx.vhd"
[ $(alloc "$T/fx.vhd") -lt $((6 * 1024 * 1024)) ] || fail "fixed: zeros were written ($(alloc "$T/fx.vhd"))"
ok "$DISKIMG" convert -O vpc "$T/src.qcow2" "$T/dy.vhd"
"$DISKIMG" map --output=json "$T/dy.vhd" | grep -c '"data": true' | grep -qx 4 || fail "dynamic: blocks"
[ $(stat -c %s "$T/dy.vhd") -lt $((9 * 1024 * 1024)) ] || fail "dynamic: too many blocks"

# Azure: fixed, force_size=on is exactly size + 512
for size in 1G 30M 7340032; do
    rm -f "$T/az.vhd"
    ok "$DISKIMG" create -q -f vpc -o subformat=fixed,force_size=on "$T/az.vhd" $size
    want=$(numfmt --from=iec "${size}")
    [ $(stat -c %s "$T/az.vhd") = $((want + 512)) ] || fail "azure $size: $(stat -c %s "$T/az.vhd") bytes"
    [ "$(vsize "$T/az.vhd")" = "$want" ] || fail "azure $size: virtual size"
    rm -f "$T/az2.vhd"
    ok "$DISKIMG" create -q -f vpc -o azure=on "$T/az2.vhd" $size
    cmp -i 0:0 -n $want "$T/az.vhd" "$T/az2.vhd" || fail "azure=on data"
    [ $(stat -c %s "$T/az2.vhd") = $((want + 512)) ] || fail "azure=on $size"
done
expect_error "not a whole MiB.*Azure" "$DISKIMG" create -q -f vpc -o azure=on "$T/odd.vhd" 10000000
[ ! -e "$T/odd.vhd" ] || fail "odd.vhd left"
head -c 3000000 /dev/urandom > "$T/odd.raw"
expect_error "not a whole MiB.*Azure" "$DISKIMG" convert -O vpc -o azure=on "$T/odd.raw" "$T/odd.vhd"
expect_error "azure=on is subformat=fixed" "$DISKIMG" create -q -f vpc -o azure=on,subformat=dynamic "$T/x.vhd" 1G

# create -f vpc: qemu-img's line and sizes
for o in "" subformat=fixed force_size=on subformat=fixed,force_size=off; do
    for size in 1000 1M 10M 127G 130G; do
        case "$o:$size" in *fixed*:1[23]*G) continue ;; esac
        rm -f "$T/c.vhd" "$T/q.vhd"
        "$DISKIMG" create -f vpc ${o:+-o $o} "$T/c.vhd" $size > "$T/d.line" || fail "create $o $size"
        qemu-img create -f vpc ${o:+-o $o} "$T/q.vhd" $size > "$T/q.line"
        sed "s|$T/c.vhd|X|" "$T/d.line" > "$T/d1"; sed "s|$T/q.vhd|X|" "$T/q.line" > "$T/q1"
        diff "$T/q1" "$T/d1" || fail "create $o $size: line differs"
        [ "$(vsize "$T/c.vhd")" = "$(vsize "$T/q.vhd")" ] || fail "create $o $size: size"
        [ "$(stat -c %s "$T/c.vhd")" = "$(stat -c %s "$T/q.vhd")" ] || fail "create $o $size: file size"
        # the footers agree but for the time stamp, the unique id, the checksum
        cmp <(tail -c 512 "$T/c.vhd" | head -c 24) <(tail -c 512 "$T/q.vhd" | head -c 24) || fail "footer head"
        cmp <(tail -c 512 "$T/c.vhd" | head -c 64 | tail -c 36) <(tail -c 512 "$T/q.vhd" | head -c 64 | tail -c 36) ||
            fail "create $o $size: footer fields differ from qemu-img's"
    done
done
"$DISKIMG" create -f vpc -o help x | grep -q "force_size" || fail "help"
expect_error "[Bb]acking file" "$DISKIMG" create -f vpc -b "$T/src.qcow2" "$T/b.vhd"
echo ok
