#!/bin/bash
# Targets whose names are close to NAME_MAX (255 bytes): the temporary
# names (".NAME.diskimg-XXXXXX", and ".NAME.diskimg-old-XXXXXX" for the
# old file kept during the commit) are shortened to fit, still starting
# with the target's name (cut at a UTF-8 character) so that a leftover
# tells whose it is.  New, over an existing file, for every file of a
# multi-file vmdk; a vmdk whose extent names would not fit is refused
# before anything is written.
. "$(dirname "$0")/lib.sh"
need qemu-img
mkdir -p "$T/d"
gen -s 5 -m 4K -M 256K 2M "$T/src.raw"
name() { printf "%${1}s" "" | sed "s/ /${2:-a}/g"; }

n254=$(name 250).raw
n255=$(name 249).qcow2
for t in "$n254:raw" "$n255:qcow2"; do
    f=${t%:*} fmt=${t#*:}
    ok "$DISKIMG" convert -O "$fmt" "$T/src.raw" "$T/d/$f"
    qcompare "$T/src.raw" "$T/d/$f"
    # again, over the file
    ok "$DISKIMG" convert -O "$fmt" "$T/src.raw" "$T/d/$f"
    qcompare "$T/src.raw" "$T/d/$f"
    [ "$(ls -A "$T/d" | wc -l)" = 1 ] || fail "$fmt: left behind: $(ls -A "$T/d")"
    rm -f "$T/d/$f"
done
echo "254- and 255-byte names: new and over a file"

# multi-file vmdk: the extents' names are 5 bytes longer than the target's
v=$(name 245).vmdk
for sub in twoGbMaxExtentFlat monolithicFlat twoGbMaxExtentFlat; do
    ok "$DISKIMG" convert -O vmdk -o subformat=$sub "$T/src.raw" "$T/d/$v"
    qcompare "$T/src.raw" "$T/d/$v"
done
[ "$(ls -A "$T/d" | wc -l)" = 2 ] || fail "vmdk: left behind: $(ls -A "$T/d")"
rm -f "$T/d"/*
v=$(name 247).vmdk
expect_error "longer than a folder entry" \
    "$DISKIMG" convert -O vmdk -o subformat=monolithicFlat "$T/src.raw" "$T/d/$v"
[ -z "$(ls -A "$T/d")" ] || fail "a refused vmdk left files: $(ls -A "$T/d")"
echo "vmdk of several files: 250-byte extent names; 257 refused"

# a leftover of a killed run names its target: the start of the name, cut
# at a character (2-byte UTF-8 characters), valid UTF-8, within NAME_MAX
u=$(name 125 é).raw
DISKIMG_FAULT=write:1+:delay200 "$DISKIMG" convert "$T/src.raw" "$T/d/$u" 2>/dev/null &
pid=$!
for ((i = 0; i < 250; i++)); do
    ls -A "$T/d" | grep -q diskimg- && break
    sleep 0.02
done
kill -KILL $pid; wait $pid 2>/dev/null
left=$(ls -A "$T/d")
[ "$(echo "$left" | wc -l)" = 1 ] || fail "expected one leftover: $left"
[ ${#left} -gt 0 ] && [ "$(printf %s "$left" | wc -c)" -le 255 ] || fail "leftover name too long"
printf %s "$left" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1 || fail "leftover name is not UTF-8"
[[ $left == .$(name 100 é)*.diskimg-?????? ]] || fail "leftover does not name its target: $left"
exit 0
