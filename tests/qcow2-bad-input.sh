#!/bin/bash
# Hostile images: each case patches bytes of a qemu-img-made image and must
# fail with exit 1 and a message naming the problem (no crash, no hang, no
# output file left behind).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
qemu-img create -q -f qcow2 base.qcow2 4M
qemu-io -c 'write -P 0x71 0 200k' -c 'write -P 0x72 3M 64k' base.qcow2 >/dev/null
L1=$(peek64 base.qcow2 40)
L2=$(( $(peek64 base.qcow2 "$L1") & 0x00fffffffffffe00 ))
DATA=$(( $(peek64 base.qcow2 "$L2") & 0x00fffffffffffe00 ))
SIZE=$(stat -c %s base.qcow2)

n=0
# bad REGEX HEXPATCH-OFFSET HEX [OFFSET HEX]... : a copy of base.qcow2 patched
bad() {
    local re=$1; shift
    n=$((n + 1))
    cp base.qcow2 bad$n.qcow2
    while [ $# -ge 2 ]; do poke bad$n.qcow2 "$1" "$2"; shift 2; done
    expect_error "$re" timeout 20 "$DISKIMG" convert -f qcow2 -O raw bad$n.qcow2 out$n.raw
    [ -e out$n.raw ] && fail "case $n ($re): output left behind"
    return 0
}

# header fields
bad "bad magic" 0 51464900
expect_error "no known format signature" "$DISKIMG" convert -O raw bad$n.qcow2 o.raw
bad "unsupported qcow2 version 4" 4 "$(be32 4)"
bad "qcow version 1 images are not supported" 4 "$(be32 1)"
bad "cluster_bits 40 is out of range 9..21" 20 "$(be32 40)"
bad "cluster_bits 8 is out of range" 20 "$(be32 8)"
bad "header_length 103 is invalid" 100 "$(be32 103)"
bad "header_length 65544 is larger than the cluster size" 100 "$(be32 65544)"
bad "refcount_order 7 is out of range 0..6" 96 "$(be32 7)"
bad "L1 table has 2147483647 entries \(max 4194304\)" 36 "$(be32 2147483647)"
bad "L1 table has 0 entries, but the virtual size 4194304 needs 1" 36 "$(be32 0)"
bad "L1 table offset 0x30200 is not aligned" 40 "$(be64 $((L1 + 512)))"
bad "L1 table .* runs past the end of the file" 40 "$(be64 $((SIZE + 65536 * 4)))"
bad "virtual size .* is too large" 24 "$(be64 $((1 << 62)))"
bad "no refcount table" 56 "$(be32 0)"
bad "refcount table of 1000 clusters is larger than" 56 "$(be32 1000)"
bad "refcount table offset 0x10100 is not" 48 "$(be64 $((0x10100)))"
bad "image has 70000 snapshots \(max 65536\)" 60 "$(be32 70000)"
bad "snapshot table offset 0x0 is not" 60 "$(be32 1)"
bad "snapshot table entry 0 at offset .* past the end of the file" 60 "$(be32 1)" 64 "$(be64 $((SIZE + 65536)))"
bad "unknown compression_type 2" 72 0000000000000008 104 02
bad "compression_type 1 needs the compression type incompatible bit" 104 01
bad "uses an external data file but does not name it" 79 04
bad "raw external data bit is set without an external data file" 95 02
bad "unknown crypt_method 9" 32 "$(be32 9)"

# header extensions and the backing file name
bad "header extension 0x6803f857 at offset 112 has length 100000, past the end" 116 "$(be32 100000)"
bad "feature name table length 383 is not a multiple of 48" 116 "$(be32 383)"
bad "backing file name of 2000 bytes is too long \(max 1023\)" 8 "$(be64 1024)" 16 "$(be32 2000)"
bad "backing file name offset 70000 is outside the header cluster" 8 "$(be64 70000)" 16 "$(be32 4)"
bad "backing file name .* runs past the header cluster" 8 "$(be64 65000)" 16 "$(be32 1000)"
END=$(ext_end base.qcow2)
bad "backing format name of 100 bytes is too long \(max 15\)" "$END" "e2792aca$(be32 100)"
bad "header extension 0xe2792aca appears twice" "$END" "e2792aca$(be32 3)71636f0000000000e2792aca$(be32 3)7261770000000000"

# L1 and L2 entries
bad "L1 entry 0 \(0x0100000000040000\) at offset $L1 has reserved bits set" "$L1" 0100000000040000
bad "L2 table offset 0x40200 is not aligned to the cluster size" "$L1" "$(be64 $((L2 + 512)))"
bad "L2 table at offset $((SIZE + 65536)) is past the end of the file" "$L1" "$(be64 $((SIZE + 65536)))"
bad "L2 entry 0x8000000000050002 at offset $L2 has reserved bits set" "$L2" 8000000000050002
bad "host offset 0x50200 is not aligned to the cluster size" "$L2" "$(be64 $((DATA + 512)))"
bad "data cluster at host offset $((SIZE + 65536 * 2)) .* past the end of the file" \
    "$L2" "$(be64 $((SIZE + 65536 * 2)))"
bad "compressed data .* starts at host offset $((SIZE + 100)), past the end of the file" \
    "$L2" "$(be64 $(( (1 << 62) | (SIZE + 100) )))"
bad "compressed L2 entry .* points into the header cluster" "$L2" "$(be64 $(( (1 << 62) | 100 )))"
bad "compressed L2 entry .* has the copied flag set" "$L2" "$(be64 $(( (3 << 62) | DATA )))"

# an L2 table that is other metadata (its entries would be read as pointers)
REFT=$(peek64 base.qcow2 48)
bad "L2 table at host offset $REFT \(L1 entry 0\) overlaps the refcount table \(host offset $REFT, 65536 bytes\)" \
    "$L1" "$(be64 $((REFT | (1 << 63))))"
bad "L2 table at host offset $L1 \(L1 entry 0\) overlaps the L1 table" "$L1" "$(be64 $((L1 | (1 << 63))))"
# an L2 table cut by the end of the file: a truncated image, not empty entries
cp base.qcow2 l2cut.qcow2
truncate -s $((L2 + 100)) l2cut.qcow2
expect_error "L2 table at offset $L2 is cut by the end of the file \($((L2 + 100)) bytes\)" \
    "$DISKIMG" convert -O raw l2cut.qcow2 t.raw
[ -e t.raw ] && fail "output left behind"

# a truncated image: a data cluster past the new end is an error...
cp base.qcow2 trunc.qcow2
truncate -s $((SIZE - 65536)) trunc.qcow2
expect_error "data cluster at host offset $((SIZE - 65536)) .* past the end of the file" \
    "$DISKIMG" convert -O raw trunc.qcow2 t.raw
# ...but the tail of a cluster cut by the end of the file reads as zeros, as in qemu
cp base.qcow2 cut.qcow2
truncate -s $((SIZE - 4096)) cut.qcow2
readback cut.qcow2

# compressed clusters: bad data, a stream that inflates past the cluster
# (a 64 KiB cluster's stream in a 4 KiB-cluster image) and one that is short
qemu-img convert -c -O qcow2 -o cluster_size=4K base.qcow2 c4.qcow2
qemu-img convert -c -O qcow2 -o cluster_size=64K base.qcow2 c64.qcow2
qemu-img convert -c -O qcow2 -o cluster_size=64K,compression_type=zstd base.qcow2 z64.qcow2
l2of() { echo $(( $(peek64 "$1" "$(peek64 "$1" 40)") & 0x00fffffffffffe00 )); }
C4L2=$(l2of c4.qcow2); C64L2=$(l2of c64.qcow2); Z64L2=$(l2of z64.qcow2)
c4e=$(peek64 c4.qcow2 "$C4L2"); c64e=$(peek64 c64.qcow2 "$C64L2"); z64e=$(peek64 z64.qcow2 "$Z64L2")
c4off=$(( c4e & ((1 << 58) - 1) )); c64off=$(( c64e & ((1 << 54) - 1) ))
z64off=$(( z64e & ((1 << 54) - 1) ))
cp c64.qcow2 garbage.qcow2
poke garbage.qcow2 "$c64off" ffffffffffffffffffffffffffffffff
expect_error "compressed cluster at host offset $c64off .*corrupt deflate data" \
    "$DISKIMG" convert -O raw garbage.qcow2 o.raw
cp z64.qcow2 zgarbage.qcow2
poke zgarbage.qcow2 "$z64off" ffffffffffffffffffffffffffffffff
expect_error "compressed cluster at host offset $z64off .*corrupt zstd data" \
    "$DISKIMG" convert -O raw zgarbage.qcow2 o.raw
# bomb: append c64's first stream (one sector) to c4 and point c4's first entry at it
cp c4.qcow2 bomb.qcow2
bend=$(stat -c %s bomb.qcow2)
dd if=c64.qcow2 of=bomb.qcow2 bs=1 skip="$c64off" seek="$bend" count=512 conv=notrunc status=none
poke bomb.qcow2 "$C4L2" "$(be64 $(( (1 << 62) | bend )))"
expect_error "inflates to more than the cluster size \(4096 bytes\)" \
    "$DISKIMG" convert -O raw bomb.qcow2 o.raw
# short: c4's first stream in c64
cp c64.qcow2 short.qcow2
send=$(( ($(stat -c %s short.qcow2) + 511) / 512 * 512 ))
dd if=c4.qcow2 of=short.qcow2 bs=1 skip="$c4off" seek="$send" count=512 conv=notrunc status=none
poke short.qcow2 "$C64L2" "$(be64 $(( (1 << 62) | send )))"
expect_error "inflates to 4096 bytes, expected 65536" "$DISKIMG" convert -O raw short.qcow2 o.raw

# extended L2 bitmaps
qemu-img create -q -f qcow2 -o extended_l2=on x.qcow2 1M
qemu-io -c 'write -P 0x73 0 4k' x.qcow2 >/dev/null
XL2=$(l2of x.qcow2)
cp x.qcow2 xboth.qcow2
poke xboth.qcow2 $((XL2 + 8)) 0000000100000001
expect_error "marks subclusters both allocated and zero" "$DISKIMG" convert -O raw xboth.qcow2 o.raw
cp x.qcow2 xnohost.qcow2
poke xnohost.qcow2 $((XL2 + 16)) 00000000000000000000000000000003
expect_error "subclusters are allocated .* but there is no host cluster" \
    "$DISKIMG" convert -O raw xnohost.qcow2 o.raw

# snapshots: an entry with too much extra data, an L1 table past the end
cp base.qcow2 snap.qcow2
qemu-img snapshot -c s1 snap.qcow2
SNAPS=$(peek64 snap.qcow2 64)
cp snap.qcow2 snapextra.qcow2
poke snapextra.qcow2 $((SNAPS + 36)) "$(be32 5000)"
expect_error "has 5000 bytes of extra data \(max 1024\)" "$DISKIMG" convert -O raw snapextra.qcow2 o.raw
cp snap.qcow2 snapl1.qcow2
poke snapl1.qcow2 "$SNAPS" "$(be64 $(( $(stat -c %s snapl1.qcow2) / 65536 * 65536 + 65536 * 8 )))"
expect_error "L1 table .* runs past the end of the file" "$DISKIMG" convert -O raw -l s1 snapl1.qcow2 o.raw

# a pipe is not a seekable input
expect_error "need a seekable input" sh -c "cat base.qcow2 | '$DISKIMG' convert -f qcow2 -O raw - o.raw"
# a file shorter than a header
head -c 50 base.qcow2 > tiny.qcow2
expect_error "too short for a qcow2 header" "$DISKIMG" convert -f qcow2 -O raw tiny.qcow2 o.raw
exit 0
