#!/bin/bash
# Damaged and hostile VDIs are refused naming the file, offset and
# problem, no output left: a truncated file, a block past the end, a block
# over the header or the map, a block map past the end or over the data,
# a disk larger than its blocks, an odd block size or extra size, an undo
# image, an unknown version; 2^30 entries in a small file are refused
# before any allocation.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io

put() {   # put FILE OFF HEX
    printf "$(echo "$3" | sed 's/../\\x&/g')" | dd of="$1" bs=1 seek=$2 conv=notrunc status=none
}
fresh() {
    rm -f "$T/$1"
    qemu-img create -q -f vdi "$T/$1" 8M
    qemu-io -f vdi -c "write -P 0x61 0 64k" -c "write -P 0x62 3M 64k" "$T/$1" > /dev/null
}
refused() {   # refused REGEX IMAGE
    expect_error "$1" "$DISKIMG" convert -O raw "$2" "$T/out.raw"
    [ ! -e "$T/out.raw" ] || fail "output left for $2"
    expect_error "$1" "$DISKIMG" map "$2"
}
fresh a.vdi
size=$(stat -c %s "$T/a.vdi")
head -c $((size - 4096)) "$T/a.vdi" > "$T/trunc.vdi"
refused "block 3 \(index 1, at [0-9]+\) is past the end of the file.*truncated" "$T/trunc.vdi"
head -c 520 "$T/a.vdi" > "$T/cut.vdi"
refused "block map of 8 entries at 512 is past the end" "$T/cut.vdi"
fresh b.vdi; put "$T/b.vdi" 512 ffffff00
refused "block 0 \(index 16777215, .*past the end" "$T/b.vdi"
# index so that the block lands on the map: off_data 1024 -> map at 512 is before it;
# move the data offset back over the map instead
fresh c.vdi; put "$T/c.vdi" 344 00020000
refused "block map of 8 entries at 512 overlaps the data at 512" "$T/c.vdi"
fresh d.vdi; put "$T/d.vdi" 340 00000000
refused "block map at 0 overlaps the header" "$T/d.vdi"
fresh e.vdi; put "$T/e.vdi" 368 0000000100000000
refused "disk of 16777216 bytes is larger than its 8 blocks" "$T/e.vdi"
fresh f.vdi; put "$T/f.vdi" 376 e8030000
refused "block size 1000 is not a multiple of 512" "$T/f.vdi"
fresh g.vdi; put "$T/g.vdi" 380 64000000
refused "block extra data of 100 bytes" "$T/g.vdi"
fresh h.vdi; put "$T/h.vdi" 76 03000000
refused "unsupported image type 3" "$T/h.vdi"
fresh i.vdi; put "$T/i.vdi" 68 01000200
refused "unsupported VDI version 2.1" "$T/i.vdi"
fresh j.vdi; put "$T/j.vdi" 384 ffffff3f
refused "block map of 1073741823 entries at 512 (is past the end|overlaps the data)" "$T/j.vdi"
# a block whose data would be the map: the data offset moved onto the map
fresh k.vdi; put "$T/k.vdi" 344 00020000; put "$T/k.vdi" 384 00000000
refused "overlaps|larger than" "$T/k.vdi"
# check reports what reads refuse, and exits 2
fresh l.vdi; put "$T/l.vdi" 512 00100000
rc=0; "$DISKIMG" check "$T/l.vdi" > /dev/null 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "too large" "$T/err" || { cat "$T/err"; fail "check: exit $rc"; }
echo ok
