#!/bin/bash
# -n writes into an existing target: zero runs are punched so that stale
# data never survives; --target-is-zero skips that; a smaller target fails.
. "$(dirname "$0")/lib.sh"
need qemu-img
gen -s 11 -m 4K -M 1M 16M "$T/src.raw"
head -c $((16 * 1024 * 1024)) /dev/urandom > "$T/dst.raw"
ino=$(stat -c %i "$T/dst.raw")
ok "$DISKIMG" convert -n "$T/src.raw" "$T/dst.raw"
cmp "$T/src.raw" "$T/dst.raw" || fail "stale data survived -n"
[ "$(stat -c %i "$T/dst.raw")" = "$ino" ] || fail "-n replaced the file instead of writing into it"
[ "$(alloc "$T/dst.raw")" -lt $((16 * 1024 * 1024)) ] || fail "-n did not punch zero runs"

# a larger target keeps its tail, like qemu-img
head -c $((20 * 1024 * 1024)) /dev/urandom > "$T/big.raw"
tail -c $((4 * 1024 * 1024)) "$T/big.raw" > "$T/tail.bin"
ok "$DISKIMG" convert -n "$T/src.raw" "$T/big.raw"
head -c $((16 * 1024 * 1024)) "$T/big.raw" | cmp - "$T/src.raw" || fail "larger target: head differs"
tail -c $((4 * 1024 * 1024)) "$T/big.raw" | cmp - "$T/tail.bin" || fail "larger target: tail changed"

# --target-is-zero: a zeroed target is not punched again, content still right
truncate -s 16M "$T/zero.raw"
ok "$DISKIMG" convert -n --target-is-zero "$T/src.raw" "$T/zero.raw"
cmp "$T/src.raw" "$T/zero.raw" || fail "--target-is-zero content differs"

# too small a target, and a missing one
truncate -s 1M "$T/small.raw"
expect_error "smaller" "$DISKIMG" convert -n "$T/src.raw" "$T/small.raw"
[ "$(stat -c %s "$T/small.raw")" = 1048576 ] || fail "small target was changed"
expect_error "does not exist" "$DISKIMG" convert -n "$T/src.raw" "$T/missing.raw"
[ -e "$T/missing.raw" ] && fail "missing target was created"
expect_error "needs -n" "$DISKIMG" convert --target-is-zero "$T/src.raw" "$T/x.raw"
exit 0
