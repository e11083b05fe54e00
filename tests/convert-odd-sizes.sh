#!/bin/bash
# Edge sizes: empty, 1 byte, around 512/4096/chunk boundaries, data at the very end.
. "$(dirname "$0")/lib.sh"
chunk=$((1024 * 1024))
for size in 0 1 511 512 513 4095 4096 4097 $((chunk - 1)) $chunk $((chunk + 1)) $((3 * chunk + 4097)); do
    rm -f "$T/s.raw" "$T/o.raw"
    head -c "$size" /dev/urandom > "$T/s.raw"
    ok "$DISKIMG" convert "$T/s.raw" "$T/o.raw"
    cmp "$T/s.raw" "$T/o.raw" || fail "size $size: content differs"
    # the same size with only its last byte set
    rm -f "$T/s.raw" "$T/o.raw"
    truncate -s "$size" "$T/s.raw"
    [ "$size" -gt 0 ] && printf '\x5a' | dd of="$T/s.raw" bs=1 seek=$((size - 1)) conv=notrunc status=none
    ok "$DISKIMG" convert "$T/s.raw" "$T/o.raw"
    cmp "$T/s.raw" "$T/o.raw" || fail "size $size, last byte set: content differs"
    [ "$(stat -c %s "$T/o.raw")" = "$size" ] || fail "size $size: output size differs"
done
exit 0
