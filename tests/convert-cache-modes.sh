#!/bin/bash
# -t none (O_DIRECT; an odd-sized tail goes through the cache), unsafe, writethrough; -T accepted;
# --progress=json lines parse and end at 100%; -v names the I/O backend.
. "$(dirname "$0")/lib.sh"
gen -s 51 -u -m 1 -M 500K $((9 * 1024 * 1024 + 4097)) "$T/src.raw"
for t in none unsafe writeback writethrough directsync; do
    ok "$DISKIMG" convert -t "$t" -T writeback "$T/src.raw" "$T/$t.raw"
    cmp "$T/src.raw" "$T/$t.raw" || fail "-t $t: content differs"
    [ "$(stat -c %s "$T/$t.raw")" = "$(stat -c %s "$T/src.raw")" ] || fail "-t $t: size differs"
done
ok "$DISKIMG" convert -t none -S 512 "$T/src.raw" "$T/n512.raw"
cmp "$T/src.raw" "$T/n512.raw" || fail "-t none -S 512: content differs"

"$DISKIMG" convert --progress=json "$T/src.raw" "$T/p.raw" 2>"$T/progress" || fail "progress run"
total=$(stat -c %s "$T/src.raw")
grep -Evq '^\{"done":[0-9]+,"total":[0-9]+,"elapsed":[0-9.]+\}$' "$T/progress" &&
    fail "malformed progress line: $(grep -Ev '^\{"done"' "$T/progress" | head -1)"
tail -n 1 "$T/progress" | grep -q "\"done\":$total,\"total\":$total," || fail "progress does not end at 100%"
# done never goes backwards
sed -E 's/.*"done":([0-9]+).*/\1/' "$T/progress" | sort -c -n || fail "progress went backwards"
ok "$DISKIMG" convert -p -q "$T/src.raw" "$T/q.raw"
[ -s "$T/stderr.ok" ] && fail "-q -p printed something"

ok "$DISKIMG" convert -v "$T/src.raw" "$T/v.raw"
grep -Eq "io backend (io_uring|pwrite)" "$T/stderr.ok" || fail "-v does not name the backend"
exit 0
