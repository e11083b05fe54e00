#!/bin/bash
# rebase rewrites a monolithicSparse image's embedded descriptor so that it
# ends with a NUL inside its area and nothing of the old text is left after
# it: readers take the text up to the first NUL (qemu reads on past the
# area, into the grain directory, when there is none there).
#   - a longer new text over an old one followed (after its NUL) by other
#     bytes: the NUL still follows the new text, the bytes after it are not
#     read as lines of it (qemu-img info, check and diskimg agree);
#   - a shorter new text (-b "", -u -b ""): zeros over the rest of the old
#     text;
#   - a new text exactly as long as the area (no room for its NUL): refused,
#     nothing written; one byte shorter fits, its NUL the area's last byte.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need perl
cd "$T" || fail "cd"

# area FILE: the embedded descriptor area (sector 1 on, desc_sectors long)
area() { perl -e 'open F, "<", $ARGV[0]; binmode F; seek F, 36, 0; read F, $b, 8;
    my $n = unpack("Q<", $b) * 512; seek F, 512, 0; read F, $a, $n; print $a' "$1"; }
# text FILE: the area up to its first NUL; fails when there is no NUL
text() { area "$1" | perl -0777 -ne 'index($_, "\0") >= 0 or exit 1; print substr($_, 0, index($_, "\0"))'; }
# after FILE: the bytes of the area after the text's NUL, without the zeros
after() { area "$1" | perl -0777 -ne 's/^[^\0]*\0//; tr/\0//d; print'; }
put_u64() { perl -e 'print pack("Q<", $ARGV[0])' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
clean() { qemu-img check -q "$1" || fail "$1: qemu-img check"; ok "$DISKIMG" check "$1" >/dev/null; }

qemu-img create -q -f vmdk b1.vmdk 1M
qemu-io -f vmdk -c 'write -P 17 0 64k' b1.vmdk >/dev/null
long=parent-with-a-much-longer-name-than-b1.vmdk
cp b1.vmdk "$long"
qemu-img create -q -f vmdk -b b1.vmdk -F vmdk c.vmdk
qemu-io -f vmdk -c 'write -P 51 512k 64k' c.vmdk >/dev/null
qemu-img convert -O raw c.vmdk c.raw
old=$(text c.vmdk) || fail "c.vmdk: no NUL after the descriptor qemu-img wrote"
len0=$(text c.vmdk | wc -c)

# other bytes after the old text's NUL (what a tool that rewrote the text
# shorter without clearing the rest leaves): a line of each key a rebase
# writes, then more
junk='parentFileNameHint="junk.vmdk"
parentCID=deadbeef
ddb.junk = "1"
'
printf '%s' "$junk" | dd of=c.vmdk bs=1 seek=$((512 + len0 + 1)) conv=notrunc status=none
[ "$(text c.vmdk)" = "$old" ] || fail "the junk changed the text"
[ "$(jfield c.vmdk backing-filename)" = b1.vmdk ] || fail "qemu-img reads the junk"

# longer: the new name
ok "$DISKIMG" rebase -u -b "$long" -F vmdk c.vmdk
new=$(text c.vmdk) || fail "-u -b $long: no NUL after the new text"
want=$(printf '%s\n' "$old" | sed "s/^parentFileNameHint=.*/parentFileNameHint=\"$long\"/")
[ "$new" = "$want" ] || { printf '%s\n' "$new"; fail "-u -b $long: the text is not the old one with the new name"; }
case $(after c.vmdk) in *junk.vmdk*|*deadbeef*) ;; *) fail "the junk after the old text was lost, not overwritten?" ;; esac
[ "$(jfield c.vmdk backing-filename)" = "$long" ] || fail "qemu-img: backing file"
[ "$(jfield c.vmdk parent-cid)" = "$(jfield "$long" cid)" ] || fail "qemu-img: parent CID"
"$DISKIMG" info c.vmdk | grep -q "^backing file: $long\$" || fail "diskimg: backing file"
clean c.vmdk
qcompare c.vmdk c.raw

# shorter: standalone (-u, then safe mode on a copy named back to b1)
cp c.vmdk s.vmdk
tail=$(after c.vmdk)
ok "$DISKIMG" rebase -u -b "" c.vmdk
new=$(text c.vmdk) || fail "-u -b '': no NUL"
printf '%s' "$new" | grep -q parentFileNameHint && fail "-u -b '': a hint is left"
[ "$(after c.vmdk)" = "$tail" ] ||
    { area c.vmdk | od -c | tail -n 20; fail "-u -b '': bytes of the old text left after the new one"; }
qemu-img info c.vmdk | grep -q "^backing file" && fail "-u -b '': qemu-img sees a backing file"
[ "$(jfield c.vmdk parent-cid)" = 4294967295 ] || fail "-u -b '': parent CID"
clean c.vmdk
ok "$DISKIMG" rebase -u -b b1.vmdk -F vmdk s.vmdk
ok "$DISKIMG" rebase -b "" s.vmdk
text s.vmdk >/dev/null || fail "-b '': no NUL"
qemu-img info s.vmdk | grep -q "^backing file" && fail "-b '': qemu-img sees a backing file"
clean s.vmdk
qcompare s.vmdk c.raw

# an area of one sector: a text of 512 bytes has no room for its NUL
qemu-img create -q -f vmdk -b b1.vmdk -F vmdk one.vmdk
put_u64 one.vmdk 36 1
dd if=/dev/urandom bs=512 count=19 seek=2 of=one.vmdk conv=notrunc status=none  # (the rest of the old area)
ok "$DISKIMG" info one.vmdk >/dev/null
l=$(text one.vmdk | wc -c)
fit=$((512 - l + 7))             # the length of a hint that makes the text 512 bytes
name=$(printf 'n%.0s' $(seq $((fit - 5)))).vmdk
cp b1.vmdk "$name"
sum=$(sha1sum < one.vmdk)
expect_error "does not fit the embedded descriptor area \\(512 bytes\\)" \
    "$DISKIMG" rebase -u -b "$name" -F vmdk one.vmdk
[ "$(sha1sum < one.vmdk)" = "$sum" ] || fail "a refused rebase changed one.vmdk"
short=${name#n}
cp b1.vmdk "$short"
ok "$DISKIMG" rebase -u -b "$short" -F vmdk one.vmdk
[ "$(text one.vmdk | wc -c)" = 511 ] || fail "the 511-byte text"
[ "$(jfield one.vmdk backing-filename)" = "$short" ] || fail "qemu-img: the 511-byte text"
clean one.vmdk
echo "rebase-vmdk-descriptor-nul: ok"
