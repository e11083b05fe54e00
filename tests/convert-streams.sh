#!/bin/bash
# Pipes: raw from stdin (size found at EOF), raw to stdout, both at once.
. "$(dirname "$0")/lib.sh"
gen -s 31 -u -m 1 -M 300K $((6 * 1024 * 1024 + 333)) "$T/src.raw"
cat "$T/src.raw" | "$DISKIMG" convert - "$T/from-pipe.raw" || fail "stdin -> file"
cmp "$T/src.raw" "$T/from-pipe.raw" || fail "stdin -> file: content differs"
[ "$(alloc "$T/from-pipe.raw")" -lt "$(stat -c %s "$T/src.raw")" ] || fail "stdin -> file: not sparse"
"$DISKIMG" convert -O raw "$T/src.raw" - | cmp - "$T/src.raw" || fail "file -> stdout"
cat "$T/src.raw" | "$DISKIMG" convert -f raw - - | cmp - "$T/src.raw" || fail "stdin -> stdout"
: | "$DISKIMG" convert - "$T/empty.raw" || fail "empty stdin"
[ -f "$T/empty.raw" ] && [ "$(stat -c %s "$T/empty.raw")" = 0 ] || fail "empty stdin: output"
# a whole number of chunks (EOF right at a chunk boundary)
head -c $((2 * 1024 * 1024)) /dev/urandom > "$T/two.raw"
cat "$T/two.raw" | "$DISKIMG" convert - "$T/two.out" || fail "2 MiB stdin"
cmp "$T/two.raw" "$T/two.out" || fail "2 MiB stdin: content differs"
# stdout closed early: an error, not a hang or a crash
"$DISKIMG" convert -O raw "$T/src.raw" - 2>"$T/err" | head -c 1000 >/dev/null
rc=${PIPESTATUS[0]}
[ "$rc" = 1 ] || [ "$rc" = 141 ] || fail "closed stdout: exit $rc"
exit 0
