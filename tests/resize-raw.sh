#!/bin/bash
# diskimg resize on raw images, against qemu-img resize on a copy: grow
# (absolute and +), shrink only with --shrink (qemu-img's message, exit 1),
# sizes that are not multiples of 512, content below the old size kept,
# the new space reading as zeros, bad arguments.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || fail "cd"

gen -s 21 -a 70 -m 1K -M 100K $((2 * 1024 * 1024)) orig.raw
# both SIZE [OPTIONS...]: the same file size and content as qemu-img's
both() {
    local size=$1; shift
    cp orig.raw mine.raw; cp orig.raw ref.raw
    "$DISKIMG" resize -f raw "$@" mine.raw "$size" > out 2> err || { cat err; fail "resize $*"; }
    grep -qx "Image resized." out || fail "resize $* $size: no 'Image resized.'"
    qemu-img resize -q -f raw "$@" ref.raw "$size" || fail "qemu-img resize $* $size"
    cmp mine.raw ref.raw || fail "resize $*: differs from qemu-img's"
}
both 5M
both +1000
both 1M --shrink
both -333 --shrink
both 1000 --shrink
both +64k --preallocation=off
cmp -n $((2 * 1024 * 1024)) orig.raw mine.raw || fail "content below the old size changed"
cmp -i $((2 * 1024 * 1024)):0 -n 65536 mine.raw /dev/zero || fail "new space is not zeros"
# a raw image keeps holes: growing allocates nothing
cp orig.raw big.raw
"$DISKIMG" resize -q -f raw big.raw 10G || fail "grow to 10G"
[ "$(stat -c %s big.raw)" = $((10 << 30)) ] || fail "10G: wrong size"
[ "$(alloc big.raw)" -le $(( $(alloc orig.raw) + 65536 )) ] || fail "10G: space allocated"

cp orig.raw x.raw
expect_error "Use the --shrink option" "$DISKIMG" resize -f raw x.raw 1M
expect_error "Use the --shrink option" "$DISKIMG" resize -f raw x.raw -1k
cmp orig.raw x.raw || fail "refused shrink changed the file"
expect_error "must be positive" "$DISKIMG" resize --shrink -f raw x.raw 0
expect_error "must be positive" "$DISKIMG" resize --shrink -f raw x.raw -2M
expect_error "invalid size" "$DISKIMG" resize -f raw x.raw 4Q
expect_error "not supported" "$DISKIMG" resize -f raw --preallocation=full x.raw 4M
expect_error "Invalid preallocation mode" "$DISKIMG" resize -f raw --preallocation=x x.raw 4M
expect_error "no such file" "$DISKIMG" resize nothere.raw 4M
expect_error "expected an image and a size" "$DISKIMG" resize x.raw
"$DISKIMG" resize -q -f raw x.raw +0 > out || fail "+0"
[ -s out ] && fail "-q printed something"
cmp orig.raw x.raw || fail "+0 changed the file"
exit 0
