#!/bin/bash
# resize (grow) of a qcow2 image that holds data past its virtual size: L2
# entries for guest clusters past the end, and bytes past the end in its
# last cluster (a hostile image, or one whose size field another tool
# lowered).  Growing once showed that data in the new range; now the new
# range reads as zeros: the entries are dropped (their clusters freed), the
# tail of a cluster only this image uses is zeroed, and a tail that cannot
# be zeroed in place (a compressed cluster) refuses the grow, the image
# untouched.  Found by fuzz_qcow2_resize.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

# reads IMG "OFF LEN PATTERN"...: qemu-io reads each range as that byte
reads() {
    local img=$1 args=() a; shift
    for a in "$@"; do set -- $a; args+=(-c "read -q -P $3 $1 $2"); done
    qemu-io "${args[@]}" "$img" > qio 2>&1 && ! grep -q . qio
}

qemu-img create -q -f qcow2 full.qcow2 1M
qemu-io -c 'write -P 0x61 0 1M' full.qcow2 > /dev/null

# the size field says 512 KiB: the entries of [512K, 1M) are stale
cp full.qcow2 stale.qcow2
poke stale.qcow2 24 "$(be64 $((512 << 10)))"
qemu-img check -q stale.qcow2 || fail "the stale image does not check clean"
cp stale.qcow2 g.qcow2
"$DISKIMG" resize -q g.qcow2 2M 2> err || { cat err; fail "grow"; }
qemu-img check -q g.qcow2 || fail "grown: qemu-img check"
reads g.qcow2 "0 512k 0x61" "512k 1536k 0" || { cat qio; fail "grown: the new range is not zeros"; }
qemu-img check g.qcow2 2>&1 | grep -q "leaked" && fail "grown: the dropped clusters leak"

# the size ends inside a cluster: its tail past the end is zeroed
cp full.qcow2 tail.qcow2
poke tail.qcow2 24 "$(be64 $(((512 << 10) + 1536)))"
cp tail.qcow2 g.qcow2
"$DISKIMG" resize -q g.qcow2 1M 2> err || { cat err; fail "grow from inside a cluster"; }
qemu-img check -q g.qcow2 || fail "grown from inside a cluster: qemu-img check"
reads g.qcow2 "0 525824 0x61" "525824 522752 0" || { cat qio; fail "the tail is not zeros"; }

# a compressed last cluster cannot be zeroed in place: refused, untouched
qemu-img convert -q -c -O qcow2 full.qcow2 comp.qcow2
poke comp.qcow2 24 "$(be64 $(((512 << 10) + 1536)))"
cp comp.qcow2 g.qcow2
expect_error "g\.qcow2: the image ends inside a cluster \(compressed, or shared with a snapshot\) that holds bytes past its end" \
    "$DISKIMG" resize g.qcow2 1M
cmp -s comp.qcow2 g.qcow2 || fail "the refused grow changed the image"
# with its size on a cluster boundary it grows (the stale entries dropped)
poke comp.qcow2 24 "$(be64 $((512 << 10)))"
cp comp.qcow2 g.qcow2
"$DISKIMG" resize -q g.qcow2 1M 2> err || { cat err; fail "compressed: grow"; }
qemu-img check -q g.qcow2 || fail "compressed: qemu-img check"
reads g.qcow2 "0 512k 0x61" "512k 512k 0" || { cat qio; fail "compressed: not zeros"; }

# a clean image grows as before, header only (nothing to drop)
cp full.qcow2 g.qcow2
"$DISKIMG" resize -q g.qcow2 3M || fail "plain grow"
cmp -n 65536 full.qcow2 g.qcow2 > /dev/null && fail "the header did not change"
reads g.qcow2 "0 1M 0x61" "1M 2M 0" || fail "plain grow: content"
exit 0
