#!/bin/bash
# map on raw images prints exactly what qemu-img map prints (JSON and human
# form, whole image and --start-offset/--max-length windows); a 100 GiB
# sparse image maps in a handful of block-status calls; bad arguments.
. "$(dirname "$0")/lib.sh"
need qemu-img

# same_as_qemu ARGS... : stdout and exit status equal to qemu-img map's
same_as_qemu() {
    local qrc=0 drc=0
    qemu-img map "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" map "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: map $*"; }
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "map $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "map $*: output differs from qemu-img"; }
}

# images with holes, written zeros and data runs at 512-aligned offsets
gen -s 11 -m 4K -M 512K 8M "$T/a.raw"
gen -s 12 -a 30 -m 64K -M 2M 16M "$T/b.raw"
gen -s 13 -a 95 -m 4K -M 64K 3M "$T/c.raw"
truncate -s 5M "$T/hole.raw"                       # nothing but a hole
head -c 2M /dev/urandom > "$T/dense.raw"           # nothing but data
for img in a b c hole dense; do
    same_as_qemu --output=json "$T/$img.raw"
    same_as_qemu "$T/$img.raw"
    same_as_qemu --output=human -f raw "$T/$img.raw"
done
# the human form names the file as given on the command line
(cd "$T" && same_as_qemu a.raw) || exit 1

# windows, including unaligned ones, past the end and empty
size=$(stat -c %s "$T/a.raw")
for win in "--start-offset 0 --max-length 1" "--start-offset 4097 --max-length 100000" \
           "--start-offset 1M" "--max-length 3M" "--start-offset 7M --max-length 2M" \
           "--start-offset $((size - 1))" "--start-offset $size" "--start-offset 100M" \
           "--max-length 0" "--start-offset 1k --max-length 0"; do
    same_as_qemu --output=json $win "$T/a.raw"
    same_as_qemu $win "$T/a.raw"
done
for i in 1 2 3 4 5 6; do
    s=$(( (RANDOM * 32768 + RANDOM) % size )); l=$(( (RANDOM * 32768 + RANDOM) % size ))
    same_as_qemu --output=json --start-offset $s --max-length $l "$T/a.raw"
done

# the JSON is valid JSON and its extents tile the image exactly
if command -v python3 >/dev/null; then
    "$DISKIMG" map --output=json "$T/b.raw" | python3 -c '
import json, sys
m = json.load(sys.stdin)
pos = 0
for e in m:
    assert e["start"] == pos, e
    assert e["length"] > 0, e
    pos += e["length"]
assert pos == int(sys.argv[1]), pos
' "$(stat -c %s "$T/b.raw")" || fail "JSON does not parse or does not tile the image"
fi

# 100 GiB, two data runs: same as qemu-img, and a few block-status calls
# (each one is a SEEK_DATA/SEEK_HOLE pair on raw), never one per cluster
truncate -s 100G "$T/big.raw"
printf 'x' | dd of="$T/big.raw" bs=1 seek=$((5 * 1024 * 1024 * 1024 + 7)) conv=notrunc status=none
printf 'y' | dd of="$T/big.raw" bs=1 seek=$((100 * 1024 * 1024 * 1024 - 1)) conv=notrunc status=none
same_as_qemu --output=json "$T/big.raw"
same_as_qemu "$T/big.raw"
if command -v strace >/dev/null; then
    ASAN_OPTIONS=detect_leaks=0 strace -f -e trace=lseek -o "$T/strace" "$DISKIMG" map --output=json "$T/big.raw" > /dev/null ||
        fail "map under strace"
    n=$(grep -c 'lseek(.*SEEK_\(DATA\|HOLE\)' "$T/strace")
    [ "$n" -le 16 ] || fail "100 GiB sparse image took $n seeks"
fi

# output into a pipe that closes early: no error message, no hang
"$DISKIMG" map --output=json "$T/a.raw" | head -c 10 > /dev/null
# a raw stream has no size to map
expect_error "size of this stream is unknown" sh -c "cat '$T/a.raw' | '$DISKIMG' map -"

# bad arguments: message and exit 1
expect_error "invalid size '12Q' for --start-offset" "$DISKIMG" map --start-offset 12Q "$T/a.raw"
expect_error "invalid size '-5' for --max-length" "$DISKIMG" map --max-length -5 "$T/a.raw"
expect_error "--output must be 'human' or 'json'" "$DISKIMG" map --output=xml "$T/a.raw"
expect_error "unrecognized option|bad option" "$DISKIMG" map --frobnicate "$T/a.raw"
expect_error "expected one image" "$DISKIMG" map
expect_error "expected one image" "$DISKIMG" map "$T/a.raw" "$T/b.raw"
expect_error "missing.raw: cannot open: no such file" "$DISKIMG" map "$T/missing.raw"
expect_error "unknown format 'nope'" "$DISKIMG" map -f nope "$T/a.raw"
"$DISKIMG" map --help | grep -q "Usage: diskimg map" || fail "map --help"
exit 0
