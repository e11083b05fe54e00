#!/bin/bash
# Header features: an unknown header extension is skipped; unknown
# incompatible feature bits are refused naming the bit (and its name from
# the feature name table); encrypted images (AES, LUKS) are refused; the
# corrupt bit still allows reading; info reports it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
qemu-img create -q -f qcow2 base.qcow2 1M
qemu-io -c 'write -P 0x71 0 100k' -c 'write -P 0x72 700k 8k' base.qcow2 >/dev/null

# an unknown extension (5 bytes of data, padded) before the end marker
cp base.qcow2 ext.qcow2
end=$(ext_end ext.qcow2)
poke ext.qcow2 "$end" "1234567800000005$(printf hello | od -A n -t x1 | tr -d ' \n')000000"
poke ext.qcow2 $((end + 16)) 0000000000000000
qemu-img info ext.qcow2 >/dev/null || fail "qemu-img refuses the patched image"
readback ext.qcow2

# unknown incompatible bits
cp base.qcow2 inc.qcow2
poke inc.qcow2 79 20             # bit 5
expect_error "unsupported incompatible feature bit 5" "$DISKIMG" convert -O raw inc.qcow2 o.raw
poke inc.qcow2 74 01             # bit 40 too
expect_error "unsupported incompatible feature bits 5, 40" "$DISKIMG" info inc.qcow2
# the feature name table names bit 5: qemu's table entry 4 (bit 4) renamed
cp base.qcow2 named.qcow2
poke named.qcow2 79 20
[ "$(peek32 named.qcow2 112)" = $((0x6803f857)) ] || fail "feature name table not at 112"
poke named.qcow2 313 05
poke named.qcow2 314 "$(printf 'future feature' | od -A n -t x1 | tr -d ' \n')0000000000000000"
expect_error "bit 5 \(future feature\)" "$DISKIMG" convert -O raw named.qcow2 o.raw

# encryption: AES made by qemu-img; LUKS as the same header with crypt_method
# 2 (a real LUKS image takes qemu-img seconds of key derivation to create)
qemu-img create -q -f qcow2 --object secret,id=s0,data=pw \
    -o encrypt.format=aes,encrypt.key-secret=s0 aes.qcow2 1M 2>/dev/null || fail "create aes"
expect_error "encrypted images are not supported" "$DISKIMG" convert -O raw aes.qcow2 o.raw
expect_error "encrypted images are not supported" "$DISKIMG" info aes.qcow2
cp aes.qcow2 luks.qcow2
poke luks.qcow2 32 "$(be32 2)"
expect_error "encrypted images are not supported.*LUKS" "$DISKIMG" convert -O raw luks.qcow2 o.raw
[ -e o.raw ] && fail "output left behind"
poke luks.qcow2 32 "$(be32 3)"
expect_error "unknown crypt_method 3" "$DISKIMG" convert -O raw luks.qcow2 o.raw

# the corrupt bit: readable, reported by info
cp base.qcow2 corrupt.qcow2
poke corrupt.qcow2 79 02
readback corrupt.qcow2
"$DISKIMG" info --output=json corrupt.qcow2 | grep -q '"corrupt": true' || fail "corrupt not reported"
exit 0
