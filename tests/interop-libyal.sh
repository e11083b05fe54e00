#!/bin/bash
# Images diskimg writes, read by libyal's independent readers through FUSE
# (qcowmount, vmdkmount): the guest disk must be the source's bytes.  qcow2
# v2 and v3, compressed, 512 B and 2 MiB clusters; vmdk monolithicSparse,
# streamOptimized and twoGbMaxExtentSparse.
. "$(dirname "$0")/lib.sh"
need qemu-img
gen -s 61 -m 4K -M 256K 24M "$T/src.raw"
cases=(
    "qcow2 -o compat=0.10"
    "qcow2 -o compat=1.1"
    "qcow2 -c"
    "qcow2 -o cluster_size=512"
    "qcow2 -o cluster_size=2M"
    "vmdk -o subformat=monolithicSparse"
    "vmdk -o subformat=streamOptimized"
    "vmdk -o subformat=twoGbMaxExtentSparse"
)
i=0
for c in "${cases[@]}"; do
    read -r fmt opts <<<"$c"
    i=$((i + 1))
    mkdir -p "$T/$i"
    # shellcheck disable=SC2086
    ok "$DISKIMG" convert -O "$fmt" $opts "$T/src.raw" "$T/$i/out.$fmt"
    yal_read "$T/$i/out.$fmt" "$T/$i/yal.raw"
    cmp "$T/src.raw" "$T/$i/yal.raw" || fail "$c: libyal reads other bytes"
    rm -f "$T/$i/yal.raw"
done
exit 0
