#!/bin/bash
# Persistent bitmap directory entries are checked at open against the
# spec's and qemu's bounds (issue 10 item 17): each bad field is refused by
# info, measure and convert with a message naming it, where qemu refuses
# to open the image too; valid bitmaps measure as qemu-img measures them.
# 513 bitmaps of granularity 0 on a 2^58-byte image made measure wrap its
# sum ("bitmaps size: 3.8e16"); they are refused now.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
need python3
BM="python3 $TOP/tests/qcow2/bitmaps.py"

cd "$T" || fail "cd"
qemu-img create -q -f qcow2 base.qcow2 512M
qemu-io -c 'write -P 0x33 0 1M' base.qcow2 >/dev/null
qemu-img bitmap --add base.qcow2 b0
qemu-img bitmap --add -g 512 base.qcow2 b1
ok "$DISKIMG" info base.qcow2 >/dev/null

n=0
# bad REGEX EDIT... : a copy of base.qcow2 with `bitmaps.py set` edits
bad() {
    local re=$1; shift
    n=$((n + 1))
    cp base.qcow2 bad$n.qcow2
    while [ $# -ge 3 ]; do $BM bad$n.qcow2 set "$1" "$2" "$3" || fail "edit $*"; shift 3; done
    qemu-img info bad$n.qcow2 >/dev/null 2>&1 && fail "case $n ($re): qemu opens it"
    expect_error "$re" "$DISKIMG" info bad$n.qcow2
    expect_error "$re" "$DISKIMG" measure -O qcow2 bad$n.qcow2
    expect_error "$re" "$DISKIMG" convert -O raw bad$n.qcow2 out.raw
    [ -e out.raw ] && fail "case $n: output left behind"
    return 0
}
bad "bitmap 1: granularity_bits 0 is out of range 9..31" 1 gran 0
bad "bitmap 1: granularity_bits 8 is out of range 9..31" 1 gran 8
bad "bitmap 0: granularity_bits 32 is out of range 9..31" 0 gran 32
bad "bitmap 0: granularity_bits 255 is out of range" 0 gran 255
bad "bitmap 0 has type 0 \(only 1" 0 type 0
bad "bitmap 1 has type 2 \(only 1" 1 type 2
bad "bitmap 0 has reserved flags set \(0x0000000a\)" 0 flags 10
bad "bitmap 0: table of 0 entries is out of range 1..134217728" 0 table_size 0
bad "bitmap 0: table of 134217729 entries is out of range" 0 table_size 134217729
bad "bitmap 0: table offset 0x0 is not a valid cluster offset" 0 table_offset 0
bad "bitmap 1: table offset 0x[0-9a-f]*200 is not a valid cluster offset" \
    1 table_offset "$(( $($BM base.qcow2 show | cut -d' ' -f1) + 512 ))"
# 8193 entries of 64 KiB clusters name more than qemu's 512 MiB of bitmap
bad "bitmap 0: 8193 table entries name 536936448 bytes of bitmap \(max 536870912\)" \
    0 table_size 8193
# granularity 512: one table entry (64 KiB of bitmap) covers 256 MiB of 512 MiB
bad "bitmap 1: a table of 1 entries covers less than the virtual size 536870912" \
    1 table_size 1
bad "bitmap name 'b0' appears twice" 1 name b0
bad "bitmap 1 has 8 bytes of extra data|runs past the directory size" 1 extra 8

# 513 bitmaps of granularity 0 on a 2^58-byte image (2 MiB clusters)
qemu-img create -q -f qcow2 -o cluster_size=2M wrap.qcow2 $((1 << 58))
qemu-img bitmap --add -g 2G wrap.qcow2 b0
$BM wrap.qcow2 clone 513 0 || fail "clone"
expect_error "bitmap 0: granularity_bits 0 is out of range" "$DISKIMG" measure -O qcow2 wrap.qcow2
# valid: three bitmaps of 128 MiB each on 1 PiB; the sizes are qemu-img's
qemu-img create -q -f qcow2 -o cluster_size=2M huge.qcow2 $((1 << 50))
qemu-img bitmap --add -g 1M huge.qcow2 b0
$BM huge.qcow2 clone 3 || fail "clone 3"
"$DISKIMG" measure -O qcow2 huge.qcow2 >mine.txt || fail "measure huge"
qemu-img measure -O qcow2 huge.qcow2 >ref.txt || fail "qemu-img measure huge"
cmp mine.txt ref.txt || { diff mine.txt ref.txt; fail "measure huge"; }

# the granularities qemu allows, measured as qemu-img does
for g in 512 65536 2147483648; do
    qemu-img create -q -f qcow2 g.qcow2 3G
    qemu-img bitmap --add -g $g g.qcow2 x
    qemu-img bitmap --add -g $g g.qcow2 "y$g"
    for args in "" "-o cluster_size=4K" "-o cluster_size=2M,compat=1.1"; do
        "$DISKIMG" measure -O qcow2 $args g.qcow2 >mine.txt || fail "measure $g $args"
        qemu-img measure -O qcow2 $args g.qcow2 >ref.txt
        cmp mine.txt ref.txt || { diff mine.txt ref.txt; fail "measure -g $g $args"; }
    done
    "$DISKIMG" info --output=json g.qcow2 | grep -q "\"granularity\": $g" || fail "info -g $g"
done
exit 0
