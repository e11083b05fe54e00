#!/bin/bash
# diskimg rebase refuses, with a message and nothing written (the image's
# files byte for byte as they were, no temporary file):
#   a new parent outside the image's folder (../, absolute) unless
#   --allow-external; a descriptor whose old parentFileNameHint leads out of
#   the folder (safe mode must read the old chain); the image as its own
#   parent; a name a descriptor cannot hold (a double quote);
#   a new descriptor larger than the embedded descriptor area; an embedded
#   descriptor whose rewrite would span two pages of the file (not one
#   atomic write); a redundant grain table that overlaps a grain table in
#   use (writing it would damage the table: the grains already appended are
#   cut off again).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need perl
cd "$T" || fail "cd"

# put_u64 FILE OFFSET VALUE: a little-endian field of the sparse header
put_u64() { perl -e 'print pack("Q<", $ARGV[0])' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
put_u32() { perl -e 'print pack("L<", $ARGV[0])' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
get_u32() { dd if="$1" bs=1 skip="$2" count=4 status=none | perl -0777 -ne 'print unpack("L<", $_)'; }

mkdir -p in out
qemu-img create -q -f vmdk in/b1.vmdk 4M
qemu-io -f vmdk -c 'write -P 17 0 1M' in/b1.vmdk >/dev/null
qemu-img create -q -f vmdk in/b2.vmdk 4M
qemu-io -f vmdk -c 'write -P 34 512k 1M' in/b2.vmdk >/dev/null
qemu-img create -q -f vmdk out/o.vmdk 4M
cd in || fail "cd in"
qemu-img create -q -f vmdk -b b1.vmdk -F vmdk c.vmdk

# the reference rule
for u in -u ""; do
    vmdk_refused "outside" "$DISKIMG" rebase $u -b ../out/o.vmdk -F vmdk c.vmdk
    vmdk_refused "outside" "$DISKIMG" rebase $u -b "$T/out/o.vmdk" -F vmdk c.vmdk
done
vmdk_refused "loop|same file|itself" "$DISKIMG" rebase -u -b c.vmdk -F vmdk c.vmdk
vmdk_refused "cannot be written as a parentFileNameHint" "$DISKIMG" rebase -u -b 'a"b.vmdk' -F vmdk c.vmdk
cp c.vmdk e.vmdk
ok "$DISKIMG" rebase --allow-external -u -b ../out/o.vmdk -F vmdk e.vmdk
[ "$(jfield e.vmdk backing-filename)" = ../out/o.vmdk ] || fail "--allow-external -u"
[ "$(jfield e.vmdk parent-cid)" = "$(jfield ../out/o.vmdk cid)" ] || fail "--allow-external: CID"
rm e.vmdk

# an old hint that leads out of the folder: safe mode refuses to read it
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse -b b1.vmdk -F vmdk h.vmdk
sed -i 's|^parentFileNameHint=.*|parentFileNameHint="../out/o.vmdk"|' h.vmdk
vmdk_refused "outside" "$DISKIMG" rebase -b b2.vmdk -F vmdk h.vmdk
vmdk_refused "outside" "$DISKIMG" rebase -b "" h.vmdk
rm h.vmdk h-s001.vmdk

# a new descriptor that does not fit the embedded area (1 sector)
long=$(printf 'p%.0s' $(seq 200)).vmdk
cp b2.vmdk "$long"
qemu-img create -q -f vmdk -b b1.vmdk -F vmdk small.vmdk
qemu-io -f vmdk -c 'write -P 51 2M 64k' small.vmdk >/dev/null
put_u64 small.vmdk 36 1
ok "$DISKIMG" info small.vmdk >/dev/null
for u in -u ""; do
    vmdk_refused "does not fit the embedded descriptor area \(512 bytes\)" \
        "$DISKIMG" rebase $u -b "$long" -F vmdk small.vmdk
done
ok "$DISKIMG" rebase -u -b b2.vmdk -F vmdk small.vmdk   # a short name still fits
[ "$(jfield small.vmdk backing-filename)" = b2.vmdk ] || fail "short name in 1 sector"
rm small.vmdk "$long"

# an embedded descriptor at sector 7: its rewrite would span two pages
qemu-img create -q -f vmdk -b b1.vmdk -F vmdk pg.vmdk
# (the text made longer than the 512 bytes left in the first page)
{ dd if=pg.vmdk bs=512 skip=1 count=20 status=none | perl -0777 -ne '($t) = split /\0/; print $t'
  printf '# %0600d\n' 0; } > d.txt
dd if=/dev/zero of=pg.vmdk bs=512 seek=1 count=20 conv=notrunc status=none
dd if=d.txt of=pg.vmdk bs=512 seek=7 conv=notrunc status=none
put_u64 pg.vmdk 28 7
put_u64 pg.vmdk 36 14
"$DISKIMG" info pg.vmdk | grep -q "^backing file: b1.vmdk" || fail "the moved descriptor does not read"
for u in -u ""; do
    vmdk_refused "would cross a 4096-byte page" "$DISKIMG" rebase $u -b b2.vmdk -F vmdk pg.vmdk
done
rm pg.vmdk d.txt

# a redundant grain table over the primary one
qemu-img create -q -f vmdk -b b1.vmdk -F vmdk rg.vmdk
rgd=$(( $(perl -e 'open F, "<", $ARGV[0]; binmode F; seek F, 48, 0; read F, $b, 8; print unpack("Q<", $b)' rg.vmdk) * 512 ))
gd=$(( $(perl -e 'open F, "<", $ARGV[0]; binmode F; seek F, 56, 0; read F, $b, 8; print unpack("Q<", $b)' rg.vmdk) * 512 ))
put_u32 rg.vmdk "$rgd" "$(get_u32 rg.vmdk "$gd")"
ok "$DISKIMG" info rg.vmdk >/dev/null
vmdk_refused "redundant grain directory entry 0 names a table at offset [0-9]+ that overlaps a grain table in use" \
    "$DISKIMG" rebase -b b2.vmdk -F vmdk rg.vmdk
qemu-img check -q rg.vmdk || fail "rg.vmdk not clean after the refusal"
echo "rebase-vmdk-hostile: ok"
