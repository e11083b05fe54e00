#!/bin/bash
# convert -n into a raw target larger than the source: nothing past the
# source's end is written or cut, whatever -t says.  With -t none (O_DIRECT)
# the image's last block is partly outside the source; it used to be padded
# to 4 KiB and the target truncated to the source's size afterwards (a 1 MiB
# file left with 12800 bytes; on a larger device 3584 zeros written past the
# end and then "cannot set the size"; on a device of the source's size,
# ENOSPC).  Also: a new -t none output of an odd size is exactly that size,
# and qcow2 -n targets keep their range past the source.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || exit 1

modes="none writeback unsafe"
# directsync needs O_DIRECT from the file system, as none does
if dd if=/dev/zero of=probe bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
    modes="$modes directsync"
fi

# sources: data ending inside a sector; data then a zero run to an end that
# is not sector-aligned (the end is cleared, not written); whole sectors
head -c 12800 /dev/urandom > s1.raw
{ head -c 8192 /dev/urandom; head -c 4609 /dev/zero; } > s2.raw
head -c 12288 /dev/urandom > s3.raw
head -c 1048576 /dev/urandom > orig.raw

check_target() {    # SRC TARGET ORIGINAL WHAT
    local n; n=$(stat -c %s "$1")
    cmp -n "$n" "$1" "$2" || fail "$4: the source's bytes differ"
    cmp -i "$n" "$3" "$2" || fail "$4: bytes past the source's end changed"
}

for t in $modes; do
    for s in s1 s2 s3; do
        cp orig.raw tgt.raw
        ok "$DISKIMG" convert -n -t "$t" -f raw -O raw "$s.raw" tgt.raw
        [ "$(stat -c %s tgt.raw)" = 1048576 ] ||
            fail "-n -t $t $s: target size changed to $(stat -c %s tgt.raw)"
        check_target "$s.raw" tgt.raw orig.raw "-n -t $t $s into a file"
        # a new output of the source's own size
        rm -f new.raw
        ok "$DISKIMG" convert -t "$t" -f raw -O raw "$s.raw" new.raw
        cmp "$s.raw" new.raw || fail "-t $t $s: new output differs"
        [ "$(stat -c %s new.raw)" = "$(stat -c %s "$s.raw")" ] || fail "-t $t $s: new output's size"
    done
done

# qcow2 target of 1 MiB: the part past the source keeps its bytes
for t in none writeback; do
    rm -f t.qcow2
    qemu-img create -q -f qcow2 t.qcow2 1M || fail "qemu-img create"
    qemu-io -c 'write -P 0x33 0 1M' t.qcow2 >/dev/null || fail "qemu-io"
    ok "$DISKIMG" convert -n -t "$t" -O qcow2 s1.raw t.qcow2
    qemu-img check -q t.qcow2 || fail "qcow2 -n -t $t: check"
    qemu-img convert -O raw t.qcow2 t.out || fail "qemu-img convert"
    cmp -n 12800 s1.raw t.out || fail "qcow2 -n -t $t: the source's bytes differ"
    qemu-io -c 'read -P 0x33 12800 1035776' t.qcow2 > rd.txt || fail "qemu-io read"
    grep -q "verification failed" rd.txt && fail "qcow2 -n -t $t: bytes past the source changed"
    [ "$(qemu-img info --output=json t.qcow2 | grep -o '"virtual-size": [0-9]*')" = '"virtual-size": 1048576' ] ||
        fail "qcow2 -n -t $t: virtual size changed"
done
# vmdk targets are refused, not damaged
qemu-img create -q -f vmdk t.vmdk 1M || fail "qemu-img create vmdk"
cp t.vmdk t0.vmdk
expect_error "not supported" "$DISKIMG" convert -n -t none -O vmdk s1.raw t.vmdk
cmp t.vmdk t0.vmdk || fail "refused vmdk target changed"

# loop devices: larger than the source, and exactly its size (through the
# cache and direct)
loops=()
trap 'for l in "${loops[@]}"; do losetup -d "$l"; done' EXIT
cp orig.raw big.img
cp orig.raw exact.img && truncate -s 12800 exact.img && cp exact.img exact0.img
if lb=$(losetup -f --show big.img 2>/dev/null) && loops+=("$lb") &&
   le=$(losetup -f --show exact.img 2>/dev/null) && loops+=("$le"); then
    for t in none writeback; do
        for s in s1 s2 s3; do
            dd if=orig.raw of="$lb" bs=64K conv=fsync status=none || fail "reset $lb"
            ok "$DISKIMG" convert -n -t "$t" -f raw -O raw "$s.raw" "$lb"
            head -c 1048576 "$lb" > dev.out
            check_target "$s.raw" dev.out orig.raw "-n -t $t $s onto a larger device"
        done
        dd if=exact0.img of="$le" bs=12800 conv=fsync status=none || fail "reset $le"
        ok "$DISKIMG" convert -n -t "$t" -f raw -O raw s1.raw "$le"
        cmp s1.raw "$le" || fail "-n -t $t onto a device of the source's size"
    done
else
    skip "no loop devices here (the regular-file cases passed)"
fi
exit 0
