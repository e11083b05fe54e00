#!/bin/bash
# diskimg resize on qcow2 images: grow (the header only, a new L1 table, a
# new refcount table too), shrink with --shrink (clusters past the new end
# freed, the file cut), across cluster sizes, refcount widths, extended L2,
# v2 and compressed images.  Every result passes qemu-img check, qemu-img
# info shows the new size, the content below the old size is unchanged and
# equals qemu-img resize's result on a copy.  Refusals (v2 snapshots, bitmaps,
# dirty images, sizes not a multiple of 512, damaged refcounts) change
# nothing; a grow stopped at any write leaves a usable image.  Images with
# internal snapshots grow and shrink like qemu-img's, the snapshots intact.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

# prefix_same A B: the shorter file is a prefix of the longer one
prefix_same() {
    local a b; a=$(stat -c %s "$1"); b=$(stat -c %s "$2")
    cmp -n $((a < b ? a : b)) "$1" "$2"
}
vsize() { qemu-img info --output=json "$1" | sed -n 's/^ *"virtual-size": \([0-9]*\),*/\1/p'; }

# same IMG SIZE [--shrink]: resize copies with both tools; check, size, content
same() {
    local img=$1 size=$2; shift 2
    cp "$img" mine.qcow2; cp "$img" ref.qcow2
    "$DISKIMG" resize "$@" mine.qcow2 "$size" > out 2> err || { cat err; fail "resize $img $size"; }
    grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "sanitizer: $img $size"; }
    grep -qx "Image resized." out || fail "$img $size: no 'Image resized.'"
    qemu-img resize -q "$@" ref.qcow2 "$size" || fail "qemu-img resize $img $size"
    qemu-img check -q mine.qcow2 || fail "$img $size: qemu-img check"
    local vm vr vi; vm=$(vsize mine.qcow2); vr=$(vsize ref.qcow2); vi=$(vsize "$img")
    [ "$vm" = "$vr" ] || fail "$img $size: virtual size $vm, qemu-img's $vr"
    qemu-img compare -q mine.qcow2 ref.qcow2 || fail "$img $size: differs from qemu-img's"
    if [ "$vm" -ge "$vi" ]; then
        # grown: the old content, then zeros
        qemu-img compare -q "$img" mine.qcow2 || fail "$img $size: content changed"
    elif [ "$vi" -le $((64 << 20)) ]; then
        qemu-img convert -O raw "$img" orig.raw
        qemu-img convert -O raw mine.qcow2 mine.raw
        cmp -n "$vm" orig.raw mine.raw || fail "$img $size: content changed"
    fi
    return 0
}

gen -s 31 -a 60 -m 2K -M 300K $((3 * 1024 * 1024)) data.raw
for o in "" cluster_size=512 cluster_size=2M refcount_bits=1 extended_l2=on,cluster_size=32k \
         compat=0.10,cluster_size=4k; do
    qemu-img convert -O qcow2 ${o:+-o "$o"} data.raw a.qcow2
    same a.qcow2 5M                 # header only (or a new L1 with small clusters)
    same a.qcow2 +200M              # a new, longer L1 table (small clusters)
    same a.qcow2 1M --shrink        # free clusters, cut the file
    same a.qcow2 -1536 --shrink     # inside a cluster
    [ "$(stat -c %s mine.qcow2)" -le "$(stat -c %s a.qcow2)" ] || fail "$o: shrink grew the file"
done
# compressed clusters, shared host clusters freed on shrink
qemu-img convert -c -O qcow2 -o cluster_size=4k data.raw c.qcow2
same c.qcow2 1500k --shrink
same c.qcow2 100M
# the refcount table must grow with the L1 table (512-byte clusters)
qemu-img create -q -f qcow2 -o cluster_size=512 big.qcow2 7900k
qemu-io -t unsafe -c 'write -P 3 0 7900k' big.qcow2 > /dev/null
same big.qcow2 1G
[ "$(peek32 mine.qcow2 56)" -gt 1 ] || fail "the refcount table did not grow"
same big.qcow2 100k --shrink
# sparse and large
qemu-img create -q -f qcow2 huge.qcow2 100G
qemu-io -t unsafe -c 'write -P 5 50G 1M' huge.qcow2 > /dev/null
same huge.qcow2 2T
same huge.qcow2 50G --shrink
same huge.qcow2 60G --shrink
# a shrink then a grow: the new space reads as zeros (also the cut cluster)
qemu-img convert -O qcow2 data.raw z.qcow2
"$DISKIMG" resize -q --shrink z.qcow2 1000448 || fail "shrink into a cluster"
"$DISKIMG" resize -q z.qcow2 3M || fail "grow back"
qemu-img check -q z.qcow2 || fail "shrink+grow: check"
qemu-img convert -O raw z.qcow2 z.raw
cmp -n 1000448 data.raw z.raw || fail "shrink+grow: content below the new size"
cmp -i 1000448:0 -n $((3 * 1024 * 1024 - 1000448)) z.raw /dev/zero || fail "shrink+grow: not zeros"

# internal snapshots: v3 grows and shrinks (L2 tables shared with a snapshot
# are copied first; the snapshots still read as before), v2 is refused
for o in "" cluster_size=1k,refcount_bits=2; do
    qemu-img convert -O qcow2 ${o:+-o "$o"} data.raw s.qcow2
    qemu-img snapshot -c one s.qcow2
    qemu-io -t unsafe -c 'write -P 9 0 64k' -c 'write -P 8 2M 100k' s.qcow2 > /dev/null
    qemu-img snapshot -c two s.qcow2
    qemu-img convert -O raw -l two s.qcow2 two.raw
    for size in 1G 1500k 511k; do
        if [ "$size" = 1G ]; then same s.qcow2 "$size"; else same s.qcow2 "$size" --shrink; fi
        qemu-img convert -O raw -l one mine.qcow2 snap.raw
        prefix_same data.raw snap.raw || fail "$o $size: snapshot one changed"
        qemu-img convert -O raw -l two mine.qcow2 snap.raw
        prefix_same two.raw snap.raw || fail "$o $size: snapshot two changed"
    done
done
qemu-img convert -O qcow2 -o compat=0.10 data.raw v2.qcow2
qemu-img snapshot -c one v2.qcow2
expect_error "Can't resize a v2 image which has snapshots" "$DISKIMG" resize v2.qcow2 8M

# refused, unchanged
qemu-img convert -O qcow2 data.raw r.qcow2
cp r.qcow2 keep.qcow2
expect_error "multiple of 512" "$DISKIMG" resize r.qcow2 +1000
expect_error "Use the --shrink option" "$DISKIMG" resize r.qcow2 1M
expect_error "not supported" "$DISKIMG" resize --preallocation=full r.qcow2 8M
cmp r.qcow2 keep.qcow2 || fail "refused resize changed the image"
cp keep.qcow2 bm.qcow2; qemu-img bitmap --add bm.qcow2 b0
expect_error "persistent bitmaps" "$DISKIMG" resize bm.qcow2 8M
cp keep.qcow2 dirty.qcow2; poke dirty.qcow2 79 01
expect_error "check -r all" "$DISKIMG" resize dirty.qcow2 8M
# a data cluster past the new end with refcount 0: refused before any change
cp keep.qcow2 bad.qcow2
REFT=$(peek64 bad.qcow2 48); RB=$(peek64 bad.qcow2 "$REFT")
NCL=$(( $(stat -c %s bad.qcow2) / 65536 ))
poke bad.qcow2 $((RB + 2 * (NCL - 1))) 0000
cp bad.qcow2 bad2.qcow2
expect_error "corruptions.*shrinking it could destroy data: repair it first" "$DISKIMG" resize --shrink bad.qcow2 64k
cmp bad.qcow2 bad2.qcow2 || fail "damaged image changed by a refused shrink"

# a grow stopped at any write (as by a crash): still an image that checks
# without errors, of the old or the new size, with its content
qemu-img create -q -f qcow2 -o cluster_size=512 cr.qcow2 1M
qemu-io -t unsafe -c 'write -P 4 0 1M' cr.qcow2 > /dev/null
qemu-img convert -O raw cr.qcow2 cr.raw
for w in $(seq 1 12); do
    cp cr.qcow2 int.qcow2
    rc=0; env DISKIMG_FAULT=write:$w+:EIO "$DISKIMG" resize -q int.qcow2 64M 2> err || rc=$?
    grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "sanitizer: write $w"; }
    qrc=0; qemu-img check int.qcow2 > /dev/null 2>&1 || qrc=$?
    [ $qrc = 0 ] || [ $qrc = 3 ] || fail "grow stopped at write $w: qemu-img check exits $qrc"
    s=$(vsize int.qcow2)
    [ "$s" = 1048576 ] || [ "$s" = 67108864 ] || fail "grow stopped at write $w: size $s"
    qemu-img convert -O raw int.qcow2 int.raw
    cmp -n 1048576 cr.raw int.raw || fail "grow stopped at write $w: content"
    [ $rc = 0 ] && break
done
[ $rc = 0 ] || fail "the grow needs more than 12 writes?"
# a shrink stopped at any write: no errors (leaks at most), the content
# below the new size intact
qemu-img convert -O qcow2 -o cluster_size=4k data.raw sh.qcow2
qemu-img snapshot -c one sh.qcow2
qemu-io -t unsafe -c 'write -P 7 1M 8k' sh.qcow2 > /dev/null
qemu-img convert -O raw sh.qcow2 sh.raw
for w in $(seq 1 30); do
    cp sh.qcow2 int.qcow2
    rc=0; env DISKIMG_FAULT=write:$w+:EIO "$DISKIMG" resize -q --shrink int.qcow2 1M 2> err || rc=$?
    grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "sanitizer: write $w"; }
    qrc=0; qemu-img check int.qcow2 > /dev/null 2>&1 || qrc=$?
    [ $qrc = 0 ] || [ $qrc = 3 ] || fail "shrink stopped at write $w: qemu-img check exits $qrc"
    qemu-img convert -O raw int.qcow2 int.raw
    cmp -n 1048576 sh.raw int.raw || fail "shrink stopped at write $w: content"
    [ $rc = 0 ] && break
done
[ $rc = 0 ] || fail "the shrink needs more than 30 writes?"
[ "$(vsize int.qcow2)" = 1048576 ] || fail "shrink: size"
exit 0
