#!/bin/bash
# The real VHDs in ../shared/samples/vhd (README there): a qemu-made
# dynamic disk reads to its recorded digest; Windows' differencing disk
# whose parent is absent is refused naming the parent (qemu-img 7.2 reads
# it silently without); the two images whose footers both fail their
# checksum are refused naming the checksum (as qemu-img does).
. "$(dirname "$0")/lib.sh"
S=$SHARED/samples/vhd
[ -d "$S" ] || skip "no samples at $S"
for f in ext2 fat-differential image image-differential; do
    bzcat "$S/$f.vhd.bz2" > "$T/$f.vhd" || fail "bzcat $f"
done
ok "$DISKIMG" convert -O raw "$T/ext2.vhd" "$T/ext2.raw"
[ "$(sha1sum < "$T/ext2.raw" | cut -d' ' -f1)" = ae94f9b2919f1d611df6c49624d9d9bc510f9378 ] ||
    fail "ext2.vhd: wrong digest"
[ "$(stat -c %s "$T/ext2.raw")" = 4212736 ] || fail "ext2.vhd: wrong size"
"$DISKIMG" info --output=json "$T/ext2.vhd" | grep -q '"virtual-size": 4212736' || fail "ext2 size"

expect_error "parent 'fat-parent.vhd' is missing" "$DISKIMG" convert -O raw "$T/fat-differential.vhd" "$T/o.raw"
[ ! -e "$T/o.raw" ] || fail "output left behind"
rc=0; "$DISKIMG" compare "$T/fat-differential.vhd" "$T/ext2.raw" 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "fat-parent.vhd" "$T/err" || fail "compare: exit $rc, $(cat "$T/err")"
# info does not open the parent; it names it
"$DISKIMG" info --output=json "$T/fat-differential.vhd" | grep -q '"backing-filename": "fat-parent.vhd"' ||
    fail "info does not name the parent"
for f in image image-differential; do
    expect_error "footer checksum mismatch" "$DISKIMG" convert -O raw "$T/$f.vhd" "$T/o.raw"
    expect_error "checksum" "$DISKIMG" info "$T/$f.vhd"
done
echo ok
