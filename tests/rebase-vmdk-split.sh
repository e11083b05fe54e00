#!/bin/bash
# diskimg rebase on VMDK images whose descriptor is a file of its own:
# twoGbMaxExtentSparse children made by qemu-img, a monolithicFlat image.
#   the descriptor file is replaced whole (temporary name, rename): its
#   text the old one with the parentCID and parentFileNameHint lines
#   changed (CRLF lines stay CRLF), its permissions kept, no temporary file
#   left; safe mode writes grains into the sparse extent file, nothing into
#   a flat one (all of it is the image's own); the guest view unchanged
#   (qemu-img compare, vmdkmount), qemu-img check clean, the chain opened by
#   qemu-img info --backing-chain.  A write or sync failing anywhere leaves
#   the old descriptor or the new one, never a temporary file.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

clean() { qemu-img check -q "$1" >/dev/null 2>&1 || { qemu-img check "$1"; fail "$2: qemu-img check"; }; }
yal_top() {
    command -v vmdkmount >/dev/null 2>&1 && [ -c /dev/fuse ] || return 0
    local mnt; mnt=$(mktemp -d "$T/yal.XXXXXX")
    timeout 30 vmdkmount "$1" "$mnt" >/dev/null 2>"$T/yal.err" || { cat "$T/yal.err"; fail "vmdkmount $1"; }
    local top; top=$(ls "$mnt" | sort -V | tail -n 1)
    local rc=0; cmp -s "$mnt/$top" "$2" || rc=1
    umount "$mnt" 2>/dev/null || fusermount -u "$mnt"; rmdir "$mnt"
    [ $rc = 0 ] || fail "vmdkmount reads $1 differently from $2"
}
no_tmp() { ls -A | grep -q '\.rebase-' && fail "$1: a temporary file was left: $(ls -A | grep rebase)"; true; }

qemu-img create -q -f vmdk b1.vmdk 4M
qemu-io -f vmdk -c 'write -P 17 0 1M' b1.vmdk >/dev/null
qemu-img create -q -f vmdk b2.vmdk 4M
qemu-io -f vmdk -c 'write -P 34 512k 1M' b2.vmdk >/dev/null
cid1=$(jfield b1.vmdk cid); cid2=$(jfield b2.vmdk cid)

split() {
    rm -f "$1" "${1%.vmdk}"-s*.vmdk
    qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse -b b1.vmdk -F vmdk "$1"
    qemu-io -f vmdk -c 'write -P 51 2M 64k' -c 'write -P 52 100k 4k' "$1" >/dev/null
}

# safe, then -u, then -b "" on a twoGbMaxExtentSparse child
split s.vmdk
chmod 640 s.vmdk
qemu-img convert -O raw s.vmdk before.raw
old=$(vmdk_desc_text s.vmdk)
ok "$DISKIMG" rebase -b b2.vmdk -F vmdk s.vmdk
no_tmp "safe"
[ "$(stat -c %a s.vmdk)" = 640 ] || fail "the descriptor's permissions changed"
want=$(printf '%s\n' "$old" | sed "s/^parentCID=.*/parentCID=$(printf %08x "$cid2")/; s/^parentFileNameHint=.*/parentFileNameHint=\"b2.vmdk\"/")
[ "$(cat s.vmdk)" = "$want" ] || { cat s.vmdk; fail "descriptor is not the old one with two lines changed"; }
clean s.vmdk "split safe"
qcompare s.vmdk before.raw
yal_top s.vmdk before.raw
qemu-img info --backing-chain s.vmdk | grep -q "^image: b2.vmdk" || fail "qemu-img does not open the chain"
ok "$DISKIMG" rebase -u -b b1.vmdk -F vmdk s.vmdk
[ "$(jfield s.vmdk parent-cid)" = "$cid1" ] || fail "split -u: parentCID"
clean s.vmdk "split -u"
ok "$DISKIMG" rebase -b "" s.vmdk
no_tmp "-b ''"
grep -q parentFileNameHint s.vmdk && fail "-b '': hint left"
grep -q '^parentCID=ffffffff$' s.vmdk || fail "-b '': parentCID"
grep -q '^createType="twoGbMaxExtentSparse"$' s.vmdk || fail "createType changed"
clean s.vmdk "split -b ''"
# (the view: the old chain's b1 under the grains written by the safe
# rebase onto b2, which are b1's bytes: the same as before)
qcompare s.vmdk before.raw
yal_top s.vmdk before.raw

# three extent files (4.5 GiB): grains for ranges that cross from one
# extent into the next
qemu-img create -q -f vmdk m1.vmdk 4608M
qemu-io -f vmdk -c 'write -P 7 2047M 2M' -c 'write -P 8 4600M 1M' m1.vmdk >/dev/null
qemu-img create -q -f vmdk m2.vmdk 4608M
qemu-io -f vmdk -c 'write -P 9 4095M 2M' m2.vmdk >/dev/null
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse -b m1.vmdk -F vmdk m.vmdk
qemu-io -f vmdk -c 'write -P 5 2048M 64k' m.vmdk >/dev/null
[ -e m-s003.vmdk ] || fail "qemu-img made fewer than three extents"
qemu-img convert -O raw m.vmdk before.raw
ok "$DISKIMG" rebase -b m2.vmdk -F vmdk m.vmdk
qcompare m.vmdk before.raw
[ "$(qemu-img map --output=json m.vmdk | grep -c '"depth": 0, "present": true')" -ge 4 ] ||
    fail "three extents: the grains were not written into the extents"
ok "$DISKIMG" rebase -b "" m.vmdk
qcompare m.vmdk before.raw
clean m.vmdk "three extents"
rm -f before.raw m*.vmdk

# CRLF lines stay CRLF, and the result still reads
split c.vmdk
sed -i 's/$/\r/' c.vmdk
qemu-img convert -O raw c.vmdk before.raw
ok "$DISKIMG" rebase -b b2.vmdk -F vmdk c.vmdk
[ "$(grep -c $'\r$' c.vmdk)" = "$(wc -l < c.vmdk)" ] || fail "CRLF lost"
grep -q $'^parentFileNameHint="b2.vmdk"\r$' c.vmdk || fail "CRLF: hint"
ok "$DISKIMG" convert -O raw c.vmdk c.raw
cmp -s c.raw before.raw || fail "CRLF: the view changed"

# failures at every write and sync: the old descriptor or the new one
split t.vmdk
qemu-img convert -O raw t.vmdk before.raw
cp t.vmdk t0.vmdk; cp t-s001.vmdk t0-s001.vmdk
restore() { cp t0.vmdk t.vmdk; cp t0-s001.vmdk t-s001.vmdk; }
DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" rebase -b b2.vmdk -F vmdk t.vmdk || fail "counting run"
read -r _ R _ W _ S _ < "$T/stats"
for op in write sync; do
    [ $op = write ] && N=$W || N=$S
    # (writes: the grains, the two grain tables, the temporary descriptor:
    # the first, one in the middle and the last three)
    list="1 $((N / 2)) $((N - 2)) $((N - 1)) $N"
    [ $op = sync ] && list=$(seq "$N")
    for n in $list; do
        restore
        expect_error "." env DISKIMG_FAULT=$op:$n:EIO "$DISKIMG" rebase -b b2.vmdk -F vmdk t.vmdk
        no_tmp "$op $n failed"
        cmp -s t.vmdk t0.vmdk || fail "$op $n failed: the descriptor changed"
        clean t.vmdk "$op $n failed"
        qcompare t.vmdk before.raw
    done
done

# monolithicFlat: a parent named and removed; nothing written to the extent
qemu-img create -q -f vmdk -o subformat=monolithicFlat f.vmdk 4M
qemu-io -f vmdk -c 'write -P 85 1M 64k' f.vmdk >/dev/null
qemu-img convert -O raw f.vmdk before.raw
sum=$(sha1sum < f-flat.vmdk)
ok "$DISKIMG" rebase -u -b b1.vmdk -F vmdk f.vmdk
grep -q '^parentFileNameHint="b1.vmdk"$' f.vmdk || fail "flat -u: no hint"
grep -q "^parentCID=$(printf %08x "$cid1")\$" f.vmdk || fail "flat -u: parentCID"
qemu-img info --backing-chain f.vmdk | grep -q "^image: b1.vmdk" || fail "flat: chain"
ok "$DISKIMG" rebase -b b2.vmdk -F vmdk f.vmdk
ok "$DISKIMG" rebase -b "" f.vmdk
[ "$(sha1sum < f-flat.vmdk)" = "$sum" ] || fail "flat: the extent was written"
grep -q parentFileNameHint f.vmdk && fail "flat -b '': hint left"
clean f.vmdk "flat"
qcompare f.vmdk before.raw
no_tmp "flat"   # (vmdkmount 20200926 does not mount monolithicFlat images)
echo "rebase-vmdk-split: ok"
