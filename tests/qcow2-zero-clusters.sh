#!/bin/bash
# Unallocated, zero-flag, preallocated-zero and preallocated clusters read as
# qemu-img reads them; block status reports them from metadata (zero ranges
# are not data, data ranges are).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

# zero flag (v3) over data written earlier, plus unallocated ranges
img=$T/zf.qcow2
qemu-img create -q -f qcow2 "$img" 4M
# write -z keeps the host clusters (zero flag + offset), -z -u frees them
qemu-io -c 'write -P 0x11 0 1M' -c 'write -z 256k 128k' -c 'write -z -u 512k 128k' \
        -c 'write -z 2M 64k' -c 'write -P 0x22 3M 64k' "$img" >/dev/null || fail "qemu-io zf"
readback "$img"
"$BDREAD" -m "$img" > "$T/map" || fail "bdread -m"
grep -q '^262144 131072 zero 0$' "$T/map" || { cat "$T/map"; fail "preallocated zero clusters"; }
grep -q '^524288 131072 zero 0$' "$T/map" || { cat "$T/map"; fail "zero-flag clusters not reported as zero"; }
grep -q '^2097152 .* zero 0$' "$T/map" || { cat "$T/map"; fail "zero flag on unallocated cluster"; }
grep -q '^3145728 65536 data 0$' "$T/map" || { cat "$T/map"; fail "data cluster not reported"; }
# data: 256k + 128k (preallocated zero) + 128k + 384k + 64k
grep -q 'allocated 983040$' "$T/map" || { cat "$T/map"; fail "allocated bytes"; }

# preallocation=metadata: every cluster has a host offset and the zero flag
for pre in metadata falloc full; do
    img=$T/pre-$pre.qcow2
    qemu-img create -q -f qcow2 -o preallocation=$pre "$img" 2M || fail "create $pre"
    qemu-io -c 'write -P 0x33 64k 64k' -c 'write -P 0x44 1000000 5000' "$img" >/dev/null ||
        fail "qemu-io $pre"
    readback "$img"
done
"$BDREAD" -m "$T/pre-metadata.qcow2" > "$T/map"
grep -q '^0 65536 data,zero 0$' "$T/map" || { cat "$T/map"; fail "preallocated zero cluster not data,zero"; }
grep -q '^65536 65536 data 0$' "$T/map" || { cat "$T/map"; fail "written preallocated cluster not data"; }

# version 2: no zero flag; preallocated clusters are plain data
img=$T/v2pre.qcow2
qemu-img create -q -f qcow2 -o compat=0.10,preallocation=metadata "$img" 1M
qemu-io -c 'write -P 0x55 4096 512' -c 'write -z 512k 64k' "$img" >/dev/null || fail "qemu-io v2"
readback "$img"

# a zero-flag cluster hides the backing file; an unallocated one shows it
qemu-img create -q -f raw "$T/base.raw" 1M
qemu-io -f raw -c 'write -P 0x66 0 1M' "$T/base.raw" >/dev/null
qemu-img create -q -f qcow2 -b base.raw -F raw "$T/top.qcow2"
qemu-io -c 'write -z 0 64k' -c 'write -P 0x77 128k 4k' "$T/top.qcow2" >/dev/null
readback "$T/top.qcow2"
"$BDREAD" -m "$T/top.qcow2" > "$T/map"
grep -q '^0 65536 zero 0$' "$T/map" || { cat "$T/map"; fail "zero flag over backing"; }
grep -q '^65536 65536 data 1$' "$T/map" || { cat "$T/map"; fail "unallocated range not from depth 1"; }
exit 0
