#!/bin/bash
# sparsify reads the image through one descriptor and punches holes through
# another, opened by name: a file renamed into IMG's place in between must
# not get holes where the first file had zeros (its data would be lost).
# The second open is slowed down with strace and the file swapped under it:
# exit 1, a message, the swapped-in file unchanged.
. "$(dirname "$0")/lib.sh"
need strace
# (LeakSanitizer cannot run under ptrace)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
truncate -s 4M "$T/zeros.raw"       # all zeros: sparsify would punch all of it
head -c 1M /dev/zero | tr '\0' 'x' > "$T/data.raw"
head -c 3M /dev/urandom >> "$T/data.raw"
sha=$(sha1sum < "$T/data.raw")
dd if=/dev/zero of="$T/zeros.raw" bs=1M count=4 conv=notrunc status=none    # allocated zeros

# which openat of IMG is the one for writing
strace -o "$T/trace" -e trace=openat "$DISKIMG" sparsify -q "$T/zeros.raw" ||
    fail "clean sparsify"
n=$(grep '^openat(' "$T/trace" | grep -n "zeros.raw.*O_WRONLY" | cut -d: -f1)
[ -n "$n" ] || fail "no open for writing in the trace"
dd if=/dev/zero of="$T/zeros.raw" bs=1M count=4 conv=notrunc status=none

rc=0
strace -o /dev/null -e inject=openat:delay_enter=3000000:when="$n" \
    "$DISKIMG" sparsify -q "$T/zeros.raw" 2>"$T/err" & pid=$!
# until it waits in that open (syscall 257, openat, with IMG already open)
for ((i = 0; i < 250; i++)); do
    c=$(pgrep -P $pid | head -n 1)
    if [ -n "$c" ] && read -r nr _ < "/proc/$c/syscall" 2>/dev/null && [ "$nr" = 257 ] &&
        ls -l "/proc/$c/fd" 2>/dev/null | grep -q zeros.raw; then
        break
    fi
    sleep 0.02
done
mv "$T/data.raw" "$T/zeros.raw"
wait $pid || rc=$?
[ $rc = 1 ] || { cat "$T/err" >&2; fail "swapped file: exit $rc"; }
grep -q "replaced" "$T/err" || { cat "$T/err" >&2; fail "no message"; }
[ "$(sha1sum < "$T/zeros.raw")" = "$sha" ] || fail "the swapped-in file was changed"
exit 0
