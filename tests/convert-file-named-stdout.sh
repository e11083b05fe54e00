#!/bin/bash
# Files really named "(stdout)" and "(stdin)" are files: standard output
# and input are told apart by a flag, not by those names (which only name
# them in messages).  A vmdk target named "(stdout)" gets its own name in
# its descriptor and may have extent files; real standard output still
# gets the name of the file it is redirected to, and refuses extent files.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || fail "cd"
gen -s 7 -m 4K -M 256K 2M src.raw
cp src.raw "(stdin)"

# extent lines of a vmdk's descriptor (embedded or not)
extents() { grep -aoE '(RW|RDONLY) [0-9]+ [A-Z]+ "[^"]*"' "$1" | sed 's/.* "\(.*\)"/\1/'; }

for sub in monolithicSparse streamOptimized; do
    ok "$DISKIMG" convert -O vmdk -o subformat=$sub "(stdin)" "(stdout)"
    qcompare src.raw "(stdout)"
    [ "$(extents "(stdout)")" = "(stdout)" ] ||
        fail "$sub: the descriptor names '$(extents "(stdout)")', not the file itself"
    rm -f "(stdout)"
done
for sub in monolithicFlat twoGbMaxExtentSparse; do
    ok "$DISKIMG" convert -O vmdk -o subformat=$sub "(stdin)" "(stdout)"
    qcompare src.raw "(stdout)"
    for e in $(extents "(stdout)"); do [ -f "$e" ] || fail "$sub: extent $e missing"; done
    rm -f "(stdout)" "(stdout)"-*
done
ls -A | grep -q 'stdout\|diskimg-' && fail "left behind: $(ls -A)"

# standard output itself: redirected to a file, the descriptor names that file
"$DISKIMG" convert -O vmdk -o subformat=streamOptimized src.raw - > out.vmdk ||
    fail "to stdout"
qcompare src.raw out.vmdk
[ "$(extents out.vmdk)" = out.vmdk ] || fail "stdout: descriptor names '$(extents out.vmdk)'"
expect_error "needs a new, named file" \
    sh -c '"$1" convert -O vmdk -o subformat=monolithicFlat src.raw - > flat.vmdk' sh "$DISKIMG"
# standard input: a pipe
"$DISKIMG" convert -f raw - piped.raw < src.raw || fail "from stdin"
cmp src.raw piped.raw || fail "from stdin: content"
exit 0
