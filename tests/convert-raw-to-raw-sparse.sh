#!/bin/bash
# raw -> raw: content identical, holes of the source stay holes, written
# zeros become holes, allocation no larger than qemu-img's.
. "$(dirname "$0")/lib.sh"
need qemu-img

# runs of 512 B .. 3 MiB at 512-aligned offsets, odd total size
gen -s 7 -m 512 -M 3M $((64 * 1024 * 1024 + 4096 + 512)) "$T/src.raw"
ok "$DISKIMG" convert "$T/src.raw" "$T/out.raw"
cmp "$T/src.raw" "$T/out.raw" || fail "content differs"
qcompare -f raw -F raw "$T/src.raw" "$T/out.raw"
[ "$(stat -c %s "$T/out.raw")" = "$(stat -c %s "$T/src.raw")" ] || fail "size differs"

# written zeros in the source must not be allocated in the output
[ "$(alloc "$T/out.raw")" -lt "$(alloc "$T/src.raw")" ] ||
    fail "output not sparser than the source: $(alloc "$T/out.raw") >= $(alloc "$T/src.raw")"
qemu-img convert -f raw -O raw "$T/src.raw" "$T/q.raw"
ours=$(alloc "$T/out.raw"); theirs=$(alloc "$T/q.raw")
[ "$ours" -le "$theirs" ] || fail "allocated $ours bytes, qemu-img $theirs"

# byte-granular run boundaries and a size that is not a multiple of 512
gen -s 8 -u -m 1 -M 200K $((5 * 1024 * 1024 + 77)) "$T/odd.raw"
ok "$DISKIMG" convert -f raw -O raw "$T/odd.raw" "$T/odd.out"
cmp "$T/odd.raw" "$T/odd.out" || fail "odd-sized content differs"

# a fully written file of zeros becomes entirely a hole
dd if=/dev/zero of="$T/zeros.raw" bs=1M count=8 status=none
ok "$DISKIMG" convert "$T/zeros.raw" "$T/zeros.out"
cmp "$T/zeros.raw" "$T/zeros.out" || fail "zeros differ"
[ "$(alloc "$T/zeros.out")" -eq 0 ] || fail "all-zero output allocates $(alloc "$T/zeros.out") bytes"

# no temporary files left behind
ls -A "$T" | grep -q diskimg && fail "temporary file left: $(ls -A "$T")"
exit 0
