#!/bin/bash
# qcow2 images of every version and cluster size, odd virtual sizes, written
# by qemu-img convert and by qemu-io at unaligned offsets: diskimg's reading
# must be byte-identical to qemu-img's, also with several reader threads.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

gen -s 11 -a 70 -m 4K -M 256K 3M "$T/src.raw"
for compat in 0.10 1.1; do
    for cs in 512 4K 64K 2M; do
        img=$T/c-$compat-$cs.qcow2
        qemu-img convert -f raw -O qcow2 -o compat=$compat,cluster_size=$cs "$T/src.raw" "$img" ||
            fail "qemu-img convert $compat $cs"
        readback "$img"
        # diskimg's qcow2 reading equals the original raw bytes too
        ok "$DISKIMG" convert -f qcow2 -O raw "$img" "$T/back.raw"
        cmp "$T/back.raw" "$T/src.raw" || fail "$img: does not read back as its source"
        rm -f "$T/back.raw"
        # several threads reading small chunks at once
        ok "$BDREAD" -t 4 -C 64K "$img" "$T/threads.raw"
        cmp "$T/threads.raw" "$T/src.raw" || fail "$img: threaded reading differs"
        rm -f "$T/threads.raw"

        # odd virtual size, unaligned writes that straddle clusters
        img=$T/w-$compat-$cs.qcow2
        qemu-img create -q -f qcow2 -o compat=$compat,cluster_size=$cs "$img" 1000001 ||
            fail "create $compat $cs"
        qemu-io -c 'write -P 0xa1 1000 3000' -c 'write -P 0xb2 65000 70000' \
                -c 'write -P 0xc3 999000 1000' -c 'write -P 0xd4 300000 1' "$img" >/dev/null ||
            fail "qemu-io $img"
        readback "$img"
    done
done

# a header virtual size that is not a multiple of 512: qemu reads whole sectors
img=$T/odd.qcow2
qemu-img create -q -f qcow2 "$img" 1M
qemu-io -c 'write -P 0x5a 0 1M' "$img" >/dev/null
poke "$img" 24 "$(be64 1000001)"
readback "$img"
ok "$DISKIMG" convert -O raw "$img" "$T/odd.raw"
[ "$(stat -c %s "$T/odd.raw")" = 999936 ] || fail "virtual size of a 1000001-byte header: $(stat -c %s "$T/odd.raw")"

# probed without -f, and the virtual size shown by info
qemu-img create -q -f qcow2 "$T/p.qcow2" 5M
ok "$DISKIMG" info --output=json "$T/p.qcow2" >/dev/null
"$DISKIMG" info --output=json "$T/p.qcow2" | grep -q '"virtual-size": 5242880' || fail "info size"
"$DISKIMG" info --output=json "$T/p.qcow2" | grep -q '"format": "qcow2"' || fail "info format"
exit 0
