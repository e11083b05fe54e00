#!/bin/bash
# vmdk delta disks: convert -B BASE.vmdk writes only what differs from the
# parent (parentFileNameHint, parentCID = the parent's CID); zero runs over
# the parent's data read as zeros (zeroed grains with zeroed_grain=on,
# unwritten grains otherwise, zero grains in a stream); qemu-img and
# diskimg read the chain as the source.  create -f vmdk -b makes qemu-img's
# descriptor.  Flat images and non-vmdk parents are refused.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T"

gen -s 71 -m 4K -M 256K 6M base.raw
cp base.raw top.raw
# new data, and zeros over the parent's data, at grain and sub-grain sizes
dd if=/dev/urandom of=top.raw bs=64K seek=10 count=3 conv=notrunc status=none
dd if=/dev/zero of=top.raw bs=64K seek=40 count=20 conv=notrunc status=none
dd if=/dev/zero of=top.raw bs=4K seek=1000 count=3 conv=notrunc status=none
ok "$DISKIMG" convert -t unsafe -O vmdk base.raw base.vmdk
base_cid=$(tr -d '\0' < base.vmdk | sed -n 's/^CID=//p')
[ -n "$base_cid" ] || fail "no CID in base.vmdk"

for o in "" zeroed_grain=on subformat=streamOptimized subformat=twoGbMaxExtentSparse \
         subformat=twoGbMaxExtentSparse,zeroed_grain=on; do
    rm -f d.vmdk d-*.vmdk
    ok "$DISKIMG" convert -t unsafe -O vmdk ${o:+-o "$o"} -B base.vmdk top.raw d.vmdk
    qemu-img check -q d.vmdk || fail "check '$o'"
    qcompare top.raw d.vmdk
    qemu-img info d.vmdk | grep -q '^backing file: base.vmdk$' || fail "'$o': no backing file"
    desc=$(tr -d '\0' < d.vmdk)
    grep -q "^parentCID=$base_cid$" <<<"$desc" || fail "'$o': parentCID is not $base_cid"
    grep -q '^parentFileNameHint="base.vmdk"$' <<<"$desc" || fail "'$o': parentFileNameHint"
    rm -f back.raw
    ok "$DISKIMG" convert -t unsafe -O raw d.vmdk back.raw
    cmp top.raw back.raw || fail "'$o': our reader reads the chain differently"
    # only the differences are stored: much less than the source's data
    total=0
    for f in d.vmdk d-*.vmdk; do [ -f "$f" ] && total=$((total + $(alloc "$f"))); done
    [ "$total" -lt $(( $(alloc top.raw) / 4 )) ] || fail "'$o': delta allocates $total bytes"
    case "$o" in *zeroed_grain=on)
        [ "$o" = zeroed_grain=on ] || continue
        "$BUILD/tools/vmdkcat" -m d.vmdk > map
        # zeroed grains where the parent has data in the zeroed 1.25 MiB, nowhere else
        awk '/zero allocated/ { n++; if ($1 < 2621440 || $1 + $2 > 3932160) bad++ }
             END { exit !(n > 0 && !bad) }' map || { cat map; fail "zeroed grains"; };;
    esac
done

# create -b: qemu-img's Formatting line and descriptor (CID aside), relative
# to the new image's folder
mkdir a b sub
for d in a b; do cp base.vmdk $d/; done
(cd a && "$DISKIMG" create -f vmdk -b base.vmdk -F vmdk x.vmdk) > a.out || fail "create -b"
(cd b && qemu-img create -f vmdk -b base.vmdk -F vmdk x.vmdk) > b.out || fail "qemu-img create -b"
diff -u b.out a.out >&2 || fail "Formatting line"
# (qemu-img prints the parentCID without leading zeros, diskimg with 8 digits as VMware)
desc() { tr -d '\0' < "$1" | grep -av '^CID=' | sed 's/^parentCID=0*/parentCID=/'; }
diff <(desc b/x.vmdk) <(desc a/x.vmdk) >&2 || fail "descriptor of create -b differs from qemu-img's"
qemu-img check -q a/x.vmdk || fail "check create -b"
qcompare base.raw a/x.vmdk
ok "$DISKIMG" create -q -f vmdk -b ../base.vmdk -F vmdk sub/y.vmdk
qcompare base.raw sub/y.vmdk
ok "$DISKIMG" convert --allow-external -t unsafe -O raw sub/y.vmdk y.raw
cmp base.raw y.raw || fail "../base.vmdk as parent"

expect_error "Flat image can't have backing file" \
    "$DISKIMG" convert -O vmdk -o subformat=monolithicFlat -B base.vmdk top.raw f.vmdk
expect_error "backing_file must be a vmdk image" \
    "$DISKIMG" convert -O vmdk -B base.raw -F raw top.raw f.vmdk
expect_error "backing_file must be a vmdk image" \
    "$DISKIMG" convert -O vmdk -B base.raw top.raw f.vmdk
[ -e f.vmdk ] && fail "a refused conversion left a file"
exit 0
