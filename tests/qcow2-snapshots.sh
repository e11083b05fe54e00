#!/bin/bash
# Internal snapshots (qemu-img snapshot -c): the active layer by default,
# a snapshot with -l NAME / snapshot.name= / snapshot.id=, a clear error for
# a missing one; info's snapshot list and check agree with qemu-img.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
snapshots_json() { awk '/"snapshots": \[/{on=1} on{print} on && /^    \],?$/{exit}' "$1"; }

for compat in 0.10 1.1; do
    img=s-$compat.qcow2
    qemu-img create -q -f qcow2 -o compat=$compat $img 2M
    qemu-io -c 'write -P 0x01 0 256k' -c 'write -P 0x02 1M 64k' $img >/dev/null
    qemu-img snapshot -c first $img
    qemu-io -c 'write -P 0x03 128k 256k' -c 'write -z 1M 32k' $img >/dev/null
    qemu-img snapshot -c second $img
    qemu-io -c 'write -P 0x04 0 64k' -c 'write -P 0x05 1900k 8k' $img >/dev/null

    readback $img
    readback $img -l first
    readback $img -l snapshot.name=second
    readback $img -l snapshot.id=1
    readback $img -l 2          # a plain argument matches an ID first
    # the snapshots differ from the active layer and from each other
    ok "$DISKIMG" convert -O raw -l first $img first.raw
    ok "$DISKIMG" convert -O raw -l second $img second.raw
    cmp -s first.raw second.raw && fail "snapshots read the same"
    rm -f first.raw second.raw
    expect_error "snapshot 'third' not found" "$DISKIMG" convert -O raw -l third $img x.raw
    expect_error "not found" "$DISKIMG" convert -O raw -l snapshot.id=1,snapshot.name=second $img x.raw

    "$DISKIMG" info --output=json $img > mine.json || fail "info"
    qemu-img info --output=json $img > ref.json
    snapshots_json mine.json > mine.snap
    snapshots_json ref.json > ref.snap
    [ -s ref.snap ] || fail "no snapshot list from qemu-img"
    cmp mine.snap ref.snap || { diff mine.snap ref.snap; fail "snapshot list ($compat)"; }

    "$DISKIMG" check --output=json $img > mine.json || fail "check: exit $?"
    qemu-img check --output=json $img > ref.json
    cmp mine.json ref.json || { diff mine.json ref.json; fail "check json ($compat)"; }
done

# a snapshot taken before the image grew: read with the current size
qemu-img create -q -f qcow2 g.qcow2 1M
qemu-io -c 'write -P 0x07 0 1M' g.qcow2 >/dev/null
qemu-img snapshot -c small g.qcow2
qemu-img resize -q g.qcow2 3M
qemu-io -c 'write -P 0x08 2M 64k' g.qcow2 >/dev/null
readback g.qcow2 -l small
readback g.qcow2
exit 0
