#!/bin/bash
# compare with one image on a pipe (stdin or <(...)), which qemu-img cannot
# do: the verdict, offset and exit status must be those qemu-img gives for
# the same bytes in a file, whether the stream is as long as the other
# image, shorter, longer with a zero tail or with data in its tail, or
# empty.  Two pipes, and -s with a pipe, are refused (exit 2).
. "$(dirname "$0")/lib.sh"
need qemu-img

poke() { printf "\\$(printf %03o "$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
# as_file IMG BYTES: compare IMG with BYTES given as a pipe, and as a file to qemu-img
as_file() {
    local img=$1 bytes=$2 qrc=0 drc=0
    qemu-img compare -f raw -F raw "$img" "$bytes" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" compare "$img" - < <(cat "$bytes") > "$T/d.out" 2> "$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer"; }
    [ $qrc = $drc ] || { cat "$T/d.out" "$T/d.err"; fail "$img vs pipe of $bytes: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" || fail "$img vs pipe of $bytes: output differs from qemu-img"
    # the pipe first, through stdin
    qrc=0 drc=0
    qemu-img compare -f raw -F raw "$bytes" "$img" > "$T/q.out" 2>/dev/null || qrc=$?
    cat "$bytes" | "$DISKIMG" compare -f raw - "$img" > "$T/d.out" 2> "$T/d.err" || drc=$?
    [ $qrc = $drc ] || { cat "$T/d.out" "$T/d.err"; fail "stdin $bytes vs $img: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" || fail "stdin $bytes vs $img: output differs from qemu-img"
}

gen -s 41 -m 4K -M 512K 6M "$T/a.raw"
size=$(stat -c %s "$T/a.raw")
as_file "$T/a.raw" "$T/a.raw"
grep -qx "Images are identical." "$T/d.out" || fail "identical stream"
# a byte changed in data and in a hole of the file
for off in 0 777 $((size / 3)) $((size - 1)); do
    cp "$T/a.raw" "$T/x.raw"; poke "$T/x.raw" $off 99
    as_file "$T/a.raw" "$T/x.raw"
    grep -qx "Content mismatch at offset $((off / 512 * 512))!" "$T/d.out" || fail "offset $off: $(cat "$T/d.out")"
done
# shorter streams (the file's tail is zero or not), an empty one
head -c 2000000 "$T/a.raw" > "$T/short.raw"; as_file "$T/a.raw" "$T/short.raw"
: > "$T/empty.raw"; as_file "$T/a.raw" "$T/empty.raw"
truncate -s 1M "$T/z1.raw"; truncate -s 3000000 "$T/z3.raw"; as_file "$T/z1.raw" "$T/z3.raw"
as_file "$T/z3.raw" "$T/z1.raw"
# longer streams: zero tail (identical with a warning), data in the tail
cp "$T/a.raw" "$T/long.raw"; head -c 1500000 /dev/zero >> "$T/long.raw"
as_file "$T/a.raw" "$T/long.raw"
grep -qx "Warning: Image size mismatch!" "$T/d.out" || fail "no size warning"
poke "$T/long.raw" $((size + 1400000)) 1
as_file "$T/a.raw" "$T/long.raw"
# an unaligned length (qemu-img rounds raw sizes up to 512 bytes, diskimg
# keeps them exact: only compare what both see the same way)
head -c 4999999 "$T/a.raw" > "$T/odd.raw"; as_file "$T/odd.raw" "$T/odd.raw"
cp "$T/odd.raw" "$T/odd2.raw"; poke "$T/odd2.raw" 4999998 0; poke "$T/odd2.raw" 4999990 1
as_file "$T/odd.raw" "$T/odd2.raw"
# a stream much longer than the chunks in flight
gen -s 42 -a 30 -m 4K -M 1M 20M "$T/b.raw"
cp "$T/b.raw" "$T/b2.raw"; poke "$T/b2.raw" 19000000 5
as_file "$T/b.raw" "$T/b2.raw"

# a streamOptimized vmdk on a pipe (a download being checked): read in one
# pass, compared and mapped as qemu-img does with the file
qemu-img convert -O vmdk -o subformat=streamOptimized "$T/b.raw" "$T/so.vmdk" || fail "qemu-img convert"
rc=0; cat "$T/so.vmdk" | "$DISKIMG" compare - "$T/b.raw" > "$T/out" 2> "$T/err" || rc=$?
[ $rc = 0 ] && grep -qx "Images are identical." "$T/out" || fail "vmdk pipe: exit $rc $(cat "$T/out" "$T/err")"
qrc=0; qemu-img compare "$T/so.vmdk" "$T/b2.raw" > "$T/q.out" || qrc=$?
rc=0; cat "$T/so.vmdk" | "$DISKIMG" compare - "$T/b2.raw" > "$T/out" 2> "$T/err" || rc=$?
[ $rc = $qrc ] && diff "$T/q.out" "$T/out" || fail "vmdk pipe with a difference: exit $rc $(cat "$T/out" "$T/err")"
qemu-img map --output=json "$T/so.vmdk" > "$T/q.map"
cat "$T/so.vmdk" | "$DISKIMG" map --output=json - > "$T/d.map" || fail "map of a vmdk pipe"
diff "$T/q.map" "$T/d.map" || fail "map of a vmdk pipe differs from qemu-img map of the file"

# process substitution, progress as JSON ending at the size found
"$DISKIMG" compare --progress=json "$T/a.raw" <(cat "$T/a.raw") > "$T/out" 2> "$T/err" || fail "<(...)"
grep -qx "Images are identical." "$T/out" || fail "<(...): $(cat "$T/out")"
tail -n 1 "$T/err" | grep -Eq "^\{\"done\":$size,\"total\":$size," || { cat "$T/err"; fail "progress"; }

# refused: two pipes, strict mode with a pipe (nothing to compare it with)
rc=0; "$DISKIMG" compare <(cat "$T/a.raw") <(cat "$T/a.raw") > /dev/null 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "only one of the images can be a pipe" "$T/err" || fail "two pipes: exit $rc $(cat "$T/err")"
rc=0; cat "$T/a.raw" | "$DISKIMG" compare -s "$T/a.raw" - > /dev/null 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "no allocation to compare" "$T/err" || fail "-s with a pipe: exit $rc $(cat "$T/err")"
# a read failure of the file side: exit 4
# (reads 1-3: the probes of b.raw, its head and last sector, and of the pipe)
rc=0; cat "$T/a.raw" | DISKIMG_FAULT=read:4:EIO "$DISKIMG" compare "$T/b.raw" - > /dev/null 2> "$T/err" || rc=$?
[ $rc = 4 ] || fail "read failure with a pipe: exit $rc $(cat "$T/err")"
exit 0
