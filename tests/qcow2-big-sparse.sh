#!/bin/bash
# A 200 GiB qcow2 image holding 1 MiB: block status describes it in a
# handful of extents straight from the L1/L2 tables, and the raw conversion
# allocates about 1 MiB and reads back identical.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
qemu-img create -q -f qcow2 big.qcow2 200G
qemu-io -c 'write -P 0x42 0 512k' -c 'write -P 0x43 100G 256k' -c "write -P 0x44 $(( (200 << 30) - (256 << 10) )) 256k" \
    big.qcow2 >/dev/null || fail "qemu-io big"
"$BDREAD" -m big.qcow2 > map || fail "bdread -m"
tail -n 1 map | grep -q '^extents 5 calls 5 allocated 1048576$' || { cat map; fail "block status of the big image"; }

ok "$DISKIMG" convert -O raw big.qcow2 big.raw
[ "$(stat -c %s big.raw)" = $((200 << 30)) ] || fail "size of the raw output"
a=$(alloc big.raw)
[ "$a" -ge $((1 << 20)) ] && [ "$a" -le $((2 << 20)) ] || fail "raw output allocates $a bytes, expected about 1 MiB"
qemu-img compare -q -f raw -F qcow2 big.raw big.qcow2 || fail "big.raw differs from big.qcow2"

# the same with 512-byte clusters (many more, smaller L2 tables), 4 GiB
qemu-img create -q -f qcow2 -o cluster_size=512 small-cl.qcow2 4G
qemu-io -c 'write -P 0x45 2G 64k' -c "write -P 0x46 $(( (4 << 30) - 512 )) 512" small-cl.qcow2 >/dev/null
"$BDREAD" -m small-cl.qcow2 > map
tail -n 1 map | grep -q '^extents 5 calls 5 allocated 66048$' || { cat map; fail "block status, 512-byte clusters"; }
ok "$DISKIMG" convert -O raw small-cl.qcow2 s.raw
qemu-img compare -q -f raw -F qcow2 s.raw small-cl.qcow2 || fail "s.raw differs"
exit 0
