#!/bin/bash
# compare on raw images: the same messages and exit statuses as qemu-img
# compare for identical images, differences anywhere (data against data,
# data against holes, unaligned bytes, last byte), size mismatches with zero
# and non-zero tails, strict mode and quiet mode; errors and progress.
. "$(dirname "$0")/lib.sh"
need qemu-img

# same_as_qemu ARGS... : stdout and exit status equal to qemu-img compare's
same_as_qemu() {
    local qrc=0 drc=0
    qemu-img compare "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" compare "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: compare $*"; }
    [ $qrc = $drc ] || { cat "$T/d.out" "$T/d.err"; fail "compare $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" || fail "compare $*: output differs from qemu-img"
}
# poke FILE OFFSET BYTE: overwrite one byte
poke() { printf "\\$(printf %03o "$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

gen -s 21 -m 4K -M 1M 24M "$T/a.raw"
cp --sparse=always "$T/a.raw" "$T/sparse.raw"   # written zeros become holes
cp --sparse=never "$T/a.raw" "$T/dense.raw"     # holes become written zeros
size=$(stat -c %s "$T/a.raw")
for args in "a.raw sparse.raw" "sparse.raw a.raw" "a.raw dense.raw" "dense.raw sparse.raw" \
            "a.raw a.raw" "-q a.raw dense.raw" "-f raw -F raw a.raw sparse.raw"; do
    (cd "$T" && same_as_qemu $args) || exit 1
done
grep -qx "Images are identical." "$T/d.out" || fail "identical images not reported"

# one byte changed: data against data, data against a hole (in the sparse
# copy), first and last byte, unaligned; reported as qemu-img reports it
for off in 0 1 511 512 4097 100000 $((size / 2 + 3)) $((size - 1)) $((RANDOM * 700 % size)); do
    cp --sparse=always "$T/a.raw" "$T/x.raw"
    poke "$T/x.raw" "$off" 255
    same_as_qemu "$T/a.raw" "$T/x.raw"
    same_as_qemu "$T/x.raw" "$T/sparse.raw"
    same_as_qemu "$T/dense.raw" "$T/x.raw"
    grep -qx "Content mismatch at offset $((off / 512 * 512))!" "$T/d.out" ||
        fail "byte $off: $(cat "$T/d.out")"
    same_as_qemu -q "$T/x.raw" "$T/a.raw"
    [ -s "$T/d.out" ] && fail "-q printed $(cat "$T/d.out")"
done
# several differences: always the first, whatever thread finished first
cp "$T/a.raw" "$T/multi.raw"
for off in 23000000 17000001 9000000 3000017; do poke "$T/multi.raw" $off 7; done
for i in 1 2 3 4 5; do same_as_qemu "$T/a.raw" "$T/multi.raw"; done
grep -qx "Content mismatch at offset $((3000017 / 512 * 512))!" "$T/d.out" || { cat "$T/d.out"; fail "first difference"; }

# sizes differ: a zero tail (hole or written zeros) is identical with a
# warning, a non-zero tail is a mismatch; strict mode refuses both
cp "$T/a.raw" "$T/longer.raw"; truncate -s $((size + 3 * 1048576)) "$T/longer.raw"
same_as_qemu "$T/a.raw" "$T/longer.raw"
grep -qx "Warning: Image size mismatch!" "$T/d.out" || fail "no size warning"
same_as_qemu "$T/longer.raw" "$T/a.raw"
same_as_qemu -s "$T/a.raw" "$T/longer.raw"
grep -qx "Strict mode: Image size mismatch!" "$T/d.out" || fail "strict size"
head -c 65536 /dev/zero >> "$T/longer.raw"
same_as_qemu "$T/longer.raw" "$T/sparse.raw"
poke "$T/longer.raw" $((size + 2 * 1048576 + 999)) 1
same_as_qemu "$T/a.raw" "$T/longer.raw"
same_as_qemu "$T/longer.raw" "$T/a.raw"
grep -qx "Content mismatch at offset $((size + 2 * 1048576 + 512))!" "$T/d.out" || fail "tail mismatch offset"
# a difference in the common part wins over the size
poke "$T/longer.raw" 5000 1
same_as_qemu "$T/longer.raw" "$T/a.raw"
# empty against zeros
: > "$T/empty.raw"; truncate -s 1M "$T/zeros.raw"
same_as_qemu "$T/empty.raw" "$T/zeros.raw"
same_as_qemu "$T/empty.raw" "$T/empty.raw"

# strict mode: the same allocation is identical, a hole against written
# zeros is a block status mismatch (at the first such offset)
cp --sparse=always "$T/a.raw" "$T/sparse2.raw"
same_as_qemu -s "$T/sparse.raw" "$T/sparse2.raw"
same_as_qemu -s "$T/a.raw" "$T/dense.raw"
grep -q "Strict mode: Offset [0-9]* block status mismatch!" "$T/d.out" || fail "strict status"
same_as_qemu -s "$T/dense.raw" "$T/a.raw"
cp --sparse=never "$T/a.raw" "$T/dense2.raw"; poke "$T/dense2.raw" 100 9
same_as_qemu -s "$T/dense.raw" "$T/dense2.raw"

# random images against each other, with and without holes
gen -s 22 -m 4K -M 256K 6M "$T/r1.raw"
gen -s 23 -a 20 -m 4K -M 256K 6M "$T/r2.raw"
same_as_qemu "$T/r1.raw" "$T/r2.raw"
same_as_qemu "$T/r2.raw" "$T/r1.raw"
truncate -s 6M "$T/z6.raw"
same_as_qemu "$T/r2.raw" "$T/z6.raw"

# progress: JSON lines on stderr ending at the total; nothing on stdout
"$DISKIMG" compare --progress=json "$T/a.raw" "$T/sparse.raw" > "$T/p.out" 2> "$T/p.err" ||
    fail "compare with progress"
grep -qx "Images are identical." "$T/p.out" || fail "progress output on stdout"
tail -n 1 "$T/p.err" | grep -Eq "^\{\"done\":$size,\"total\":$size,\"elapsed\":[0-9.]+\}$" ||
    { cat "$T/p.err"; fail "progress does not end at 100%"; }
grep -vEq '^\{"done":[0-9]+,"total":[0-9]+,"elapsed":[0-9.]+\}$' "$T/p.err" &&
    { cat "$T/p.err"; fail "progress line that is not JSON"; }
# -p on a non-terminal prints nothing extra
"$DISKIMG" compare -p "$T/a.raw" "$T/sparse.raw" > "$T/p.out" 2> "$T/p.err" || fail "compare -p"
[ -s "$T/p.err" ] && fail "-p wrote to a non-terminal: $(cat "$T/p.err")"

# errors: exit 2 when an image cannot be opened, 4 when reading fails,
# 1 for bad arguments (as qemu-img); pipes: compare-pipe.sh
rc=0; "$DISKIMG" compare "$T/a.raw" "$T/missing.raw" > /dev/null 2> "$T/err" || rc=$?
[ $rc = 2 ] || fail "missing image: exit $rc"
grep -q "missing.raw: cannot open: no such file" "$T/err" || fail "missing image message: $(cat "$T/err")"
rc=0; "$DISKIMG" compare -F nope "$T/a.raw" "$T/a.raw" > /dev/null 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "unknown format 'nope'" "$T/err" || fail "unknown format: exit $rc $(cat "$T/err")"
rc=0; "$DISKIMG" compare -T sometimes "$T/a.raw" "$T/a.raw" > /dev/null 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "Invalid source cache option: sometimes" "$T/err" || fail "bad -T: exit $rc"
# (reads 1-4 are the probes: the first 64 KiB and the last sector of each image)
rc=0; DISKIMG_FAULT=read:5:EIO "$DISKIMG" compare "$T/a.raw" "$T/dense.raw" > "$T/out" 2> "$T/err" || rc=$?
[ $rc = 4 ] || fail "read error: exit $rc"
grep -Eq "read failed: Input/output error \(offset [0-9]+\)" "$T/err" || fail "read error message: $(cat "$T/err")"
[ -s "$T/out" ] && fail "read error printed a verdict: $(cat "$T/out")"
ok env DISKIMG_FAULT=read:1+:short "$DISKIMG" compare "$T/a.raw" "$T/dense.raw" > /dev/null
expect_error "expected two images" "$DISKIMG" compare "$T/a.raw"
expect_error "expected two images" "$DISKIMG" compare "$T/a.raw" "$T/a.raw" "$T/a.raw"
expect_error "unrecognized option|bad option" "$DISKIMG" compare --frobnicate "$T/a.raw" "$T/a.raw"
expect_error "--progress must be" "$DISKIMG" compare --progress=loud "$T/a.raw" "$T/a.raw"
"$DISKIMG" compare --help | grep -q "Usage: diskimg compare" || fail "compare --help"
exit 0
