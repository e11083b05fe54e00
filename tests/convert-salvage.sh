#!/bin/bash
# --salvage: read errors become zeros and warnings, exit 0; without it the
# same error fails the conversion and leaves nothing behind.
. "$(dirname "$0")/lib.sh"
gen -s 41 -a 100 -m 1M -M 1M 8M "$T/src.raw"
expect_error "src.raw: read failed: Input/output error" \
    env DISKIMG_FAULT=read:3+:EIO "$DISKIMG" convert "$T/src.raw" "$T/a.raw"
[ -e "$T/a.raw" ] && fail "output left after a read error"
DISKIMG_FAULT=read:3+:EIO "$DISKIMG" convert --salvage "$T/src.raw" "$T/b.raw" 2>"$T/err" ||
    { cat "$T/err"; fail "--salvage failed"; }
grep -q "could not be read (read failed: Input/output error); written as zeros" "$T/err" ||
    { cat "$T/err"; fail "no per-range warning"; }
grep -q "bytes of the source could not be read" "$T/err" || fail "no summary warning"
[ "$(stat -c %s "$T/b.raw")" = 8388608 ] || fail "salvaged output has the wrong size"
# what was read is right, what was not is zero
cmp -l "$T/src.raw" "$T/b.raw" | awk '$3 != 0 { bad = 1 } END { exit bad }' ||
    fail "salvaged output holds bytes that are neither the source's nor zero"
# a transient error (one failing read) is retried piecewise: nothing lost
DISKIMG_FAULT=read:3:EIO "$DISKIMG" convert --salvage "$T/src.raw" "$T/c.raw" 2>"$T/err2" || fail "transient"
cmp "$T/src.raw" "$T/c.raw" || fail "transient error lost data"
exit 0
