#!/bin/bash
# Refcount widths 1..64 bits, lazy refcounts and the dirty bit: all read
# like qemu-img reads them; info reports refcount-bits, lazy-refcounts and
# dirty-flag; check agrees with qemu-img check.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

for rb in 1 2 4 8 16 32 64; do
    img=$T/rb$rb.qcow2
    qemu-img create -q -f qcow2 -o refcount_bits=$rb,cluster_size=4K "$img" 2M || fail "create rb $rb"
    qemu-io -c 'write -P 0x21 0 300k' -c 'write -P 0x43 1M 8k' "$img" >/dev/null || fail "io rb $rb"
    readback "$img"
    "$DISKIMG" info --output=json "$img" | grep -q "\"refcount-bits\": $rb," || fail "info refcount-bits $rb"
    "$DISKIMG" check --output=json "$img" > "$T/mine.json" || fail "check rb $rb: exit $?"
    qemu-img check --output=json "$img" > "$T/ref.json"
    cmp "$T/mine.json" "$T/ref.json" || { diff "$T/mine.json" "$T/ref.json"; fail "check json rb $rb"; }
done

# lazy refcounts, and an image left dirty by a killed writer (qemu-io abort)
img=$T/lazy.qcow2
qemu-img create -q -f qcow2 -o lazy_refcounts=on "$img" 1M
sh -c 'qemu-io -c "write -P 0x99 0 192k" -c "write -P 0x98 512k 64k" -c abort "$1"' \
    sh "$img" >/dev/null 2>&1 || true
"$DISKIMG" info --output=json "$img" > "$T/info.json" || fail "info lazy"
grep -q '"dirty-flag": true' "$T/info.json" || { cat "$T/info.json"; fail "dirty flag not reported"; }
grep -q '"lazy-refcounts": true' "$T/info.json" || fail "lazy-refcounts not reported"
readback "$img"
# refcounts of a dirty image are stale: both tools must see the same problems
rc=0; "$DISKIMG" check --output=json "$img" > "$T/mine.json" 2>/dev/null || rc=$?
qrc=0; qemu-img check --output=json "$img" > "$T/ref.json" 2>/dev/null || qrc=$?
[ $rc = $qrc ] || fail "check of a dirty image: exit $rc, qemu-img $qrc"
cmp "$T/mine.json" "$T/ref.json" || { diff "$T/mine.json" "$T/ref.json"; fail "check json dirty"; }
exit 0
