#!/bin/bash
# Compressed clusters, zlib (raw deflate) and zstd, made by qemu-img convert
# -c: compressible and incompressible data (stored plain), compressed data
# packed across host cluster boundaries, a short last cluster; read alone
# and by several threads at once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

# 3 MiB + a tail that is not a multiple of the cluster size
gen -s 5 -a 80 -m 2K -M 96K 3200K "$T/src.raw"
truncate -s 3277312 "$T/src.raw"   # 3200K + 512: a short last cluster
for ct in zlib zstd; do
    for cs in 4K 64K 2M; do
        img=$T/c-$ct-$cs.qcow2
        qemu-img convert -c -f raw -O qcow2 -o compression_type=$ct,cluster_size=$cs \
            "$T/src.raw" "$img" || fail "qemu-img convert -c $ct $cs"
        readback "$img"
        ok "$BDREAD" -t 3 -C 40K "$img" "$T/t.raw"
        cmp "$T/t.raw" "$T/src.raw" || fail "$img: threaded reading differs"
        rm -f "$T/t.raw"
        "$DISKIMG" info --output=json "$img" | grep -q "\"compression-type\": \"$ct\"" ||
            fail "info compression-type $ct"
    done
    # compressed clusters are reported as such, and as data
    "$BDREAD" -m "$T/c-$ct-64K.qcow2" > "$T/map"
    grep -q ' compressed 0$' "$T/map" || { cat "$T/map"; fail "no compressed extent ($ct)"; }
done

# mixed: compressed clusters, then plain writes over some of them
img=$T/mixed.qcow2
cp "$T/c-zlib-64K.qcow2" "$img"
qemu-io -c 'write -P 0x5c 100k 10k' -c 'write -z 1M 64k' "$img" >/dev/null || fail "qemu-io mixed"
readback "$img"
exit 0
