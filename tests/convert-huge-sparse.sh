#!/bin/bash
# A 100 GiB sparse file holding 1 MiB: holes are never read, so this is
# quick; we assert on what was allocated and on the content, not on time.
. "$(dirname "$0")/lib.sh"
need qemu-img
truncate -s 100G "$T/big.raw"
head -c 524288 /dev/urandom > "$T/a.bin"
head -c 524288 /dev/urandom > "$T/b.bin"
dd if="$T/a.bin" of="$T/big.raw" bs=64K seek=$((12345 * 16)) conv=notrunc status=none
dd if="$T/b.bin" of="$T/big.raw" bs=1 seek=$((100 * 1024 * 1024 * 1024 - 524288)) conv=notrunc status=none
ok "$DISKIMG" convert -v "$T/big.raw" "$T/out.raw"
grep -q "read 1 MiB" "$T/stderr.ok" || { cat "$T/stderr.ok"; fail "expected exactly 1 MiB read"; }
[ "$(stat -c %s "$T/out.raw")" = $((100 * 1024 * 1024 * 1024)) ] || fail "virtual size lost"
a=$(alloc "$T/out.raw")
[ "$a" -le $((2 * 1024 * 1024)) ] || fail "output allocates $a bytes for 1 MiB of data"
qcompare -f raw -F raw "$T/big.raw" "$T/out.raw"
dd if="$T/out.raw" bs=64K skip=$((12345 * 16)) count=8 status=none | cmp - "$T/a.bin" || fail "first data run differs"
tail -c 524288 "$T/out.raw" | cmp - "$T/b.bin" || fail "last data run differs"
exit 0
