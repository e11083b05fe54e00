#!/bin/bash
# create -b NAME NAME (the backing file is the image being replaced, by the
# same name or another one) would replace the image by an overlay of
# itself: its data gone and a loop left.  Refused like qemu-img does,
# with -u as well, and the image unchanged.
. "$(dirname "$0")/lib.sh"
need qemu-img
mkdir -p "$T/d"
cd "$T/d" || fail "cd"
qemu-img create -q -f qcow2 base.qcow2 1M
qemu-io -f qcow2 -c 'write -P 0x3c 0 64k' base.qcow2 >/dev/null
ln -s base.qcow2 link.qcow2
sum=$(sha1sum < base.qcow2)
for args in "-b base.qcow2 -F qcow2 base.qcow2" "-u -b base.qcow2 -F qcow2 base.qcow2 1M" \
            "-b link.qcow2 -F qcow2 base.qcow2" "-b ./base.qcow2 -F qcow2 link.qcow2" \
            "-b $T/d/base.qcow2 -F qcow2 base.qcow2"; do
    expect_error "same filename as the backing file" "$DISKIMG" create -q -f qcow2 $args
    [ "$(sha1sum < base.qcow2)" = "$sum" ] || fail "create $args: the image changed"
done
[ -z "$(ls -A | grep diskimg-)" ] || fail "left behind: $(ls -A)"
# an overlay of another file is fine
ok "$DISKIMG" create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2
qcompare base.qcow2 top.qcow2
exit 0
