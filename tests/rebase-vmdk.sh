#!/bin/bash
# diskimg rebase on monolithicSparse VMDK children made by qemu-img (the
# descriptor embedded in the sparse extent), which qemu-img 7.2 refuses:
#   -u -b NEW -F vmdk  the descriptor names NEW (parentFileNameHint) and its
#                      CID (parentCID, as qemu-img info reads it); the CID,
#                      createType and every other byte of the file as they
#                      were; qemu-img info --backing-chain opens the chain
#                      (CIDs linked); the view is NEW under the image's grains
#   -b NEW -F vmdk     the guest view is unchanged (qemu-img compare with
#                      what qemu-img read from the old chain; libyal's
#                      vmdkmount reads the same); qemu-img check clean; only
#                      the grains where the old and new parents differ are
#                      written (none onto the same parent)
#   -b ""              standalone: parentCID ffffffff, no hint, same view
#   -u -b ""           standalone, the image's own grains over zeros
#   -p                 qemu-img's progress lines (not a terminal: on stdout)
# A safe rebase failed at any write, or killed midway, leaves the old parent
# or the new one, with the content unchanged either way.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

clean() { qemu-img check -q "$1" >/dev/null 2>&1 || { qemu-img check "$1"; fail "$2: qemu-img check"; }; }
desc() { vmdk_desc_text "$1" 2>/dev/null || true; }
# the embedded descriptor's text (sector 1 on, up to its NUL)
edesc() { dd if="$1" bs=512 skip=1 count=20 status=none | perl -0777 -ne '($t) = split /\0/; print $t'; }
# everything but the embedded descriptor area (sectors 1..20)
body() { { head -c 512 "$1"; tail -c +10753 "$1"; } | sha1sum; }
# allocated bytes of the image itself
own() { qemu-img map --output=json "$1" | awk -F'[:,]' '/"depth": 0/ && /"data": true/ { s += $4 } END { print s + 0 }'; }
# vmdkmount's view of the top of a chain (it lists every layer: vmdk1 the
# bottom, the highest number the image)
yal_top() {
    command -v vmdkmount >/dev/null 2>&1 && [ -c /dev/fuse ] || return 0
    local mnt; mnt=$(mktemp -d "$T/yal.XXXXXX")
    timeout 30 vmdkmount "$1" "$mnt" >/dev/null 2>"$T/yal.err" || { cat "$T/yal.err"; fail "vmdkmount $1"; }
    local top; top=$(ls "$mnt" | sort -V | tail -n 1)
    local rc=0; cmp -s "$mnt/$top" "$2" || rc=1
    umount "$mnt" 2>/dev/null || fusermount -u "$mnt"; rmdir "$mnt"
    [ $rc = 0 ] || fail "vmdkmount reads $1 differently from $2"
}

qemu-img create -q -f vmdk b1.vmdk 4M
qemu-io -f vmdk -c 'write -P 17 0 1M' -c 'write -P 18 3M 128k' b1.vmdk >/dev/null
qemu-img create -q -f vmdk b2.vmdk 4M
qemu-io -f vmdk -c 'write -P 34 512k 1M' -c 'write -P 18 3M 128k' b2.vmdk >/dev/null
qemu-img convert -O raw b1.vmdk b1.raw
qemu-img convert -O raw b2.vmdk b2.raw
cid2=$(jfield b2.vmdk cid)

# child NAME: a child of b1 with grains of its own (one written in part,
# so that the rest of that grain is b1's)
child() {
    rm -f "$1"
    qemu-img create -q -f vmdk -b b1.vmdk -F vmdk "$1"
    qemu-io -f vmdk -c 'write -P 51 2M 64k' -c 'write -P 52 100k 4k' "$1" >/dev/null
}

# -u
child u.vmdk
cid=$(jfield u.vmdk cid); sum=$(body u.vmdk); ed=$(edesc u.vmdk)
ok "$DISKIMG" rebase -u -b b2.vmdk -F vmdk u.vmdk
[ "$(body u.vmdk)" = "$sum" ] || fail "-u changed more than the descriptor"
[ "$(jfield u.vmdk cid)" = "$cid" ] || fail "-u changed the CID"
[ "$(jfield u.vmdk parent-cid)" = "$cid2" ] || fail "-u: parentCID is not b2's CID"
[ "$(jfield u.vmdk backing-filename)" = b2.vmdk ] || fail "-u: hint is not b2.vmdk"
want=$(printf '%s\n' "$ed" | sed "s/^parentCID=.*/parentCID=$(printf %08x "$cid2")/; s/^parentFileNameHint=.*/parentFileNameHint=\"b2.vmdk\"/")
[ "$(edesc u.vmdk)" = "$want" ] || { edesc u.vmdk; fail "-u: descriptor is not the old one with two lines changed"; }
qemu-img info --backing-chain u.vmdk > chain || fail "qemu-img cannot open the new chain"
grep -q "^image: b2.vmdk" chain || fail "the chain does not reach b2.vmdk"
clean u.vmdk "-u"
ok "$DISKIMG" convert -O raw u.vmdk u.raw
qemu-img convert -O raw u.vmdk uq.raw
cmp -s u.raw uq.raw || fail "-u: diskimg and qemu-img read the new chain differently"
cmp -s u.raw b2.raw && fail "-u: the image's own grains are gone"
yal_top u.vmdk uq.raw
if command -v vmdkinfo >/dev/null 2>&1; then
    vmdkinfo u.vmdk > yinfo 2>&1 || { cat yinfo; fail "vmdkinfo u.vmdk"; }
    grep -Eq "Parent content identifier:[[:space:]]+0x0*$(printf %x "$cid2")\$" yinfo || { cat yinfo; fail "vmdkinfo: parent CID"; }
    grep -Eq "Parent filename:[[:space:]]+b2.vmdk\$" yinfo || { cat yinfo; fail "vmdkinfo: parent name"; }
fi
# onto a missing file: refused (its CID is needed), nothing written
sum=$(sha1sum < u.vmdk)
expect_error "Could not open new backing file 'nonexist.vmdk'" \
    "$DISKIMG" rebase -u -b nonexist.vmdk -F vmdk u.vmdk
[ "$(sha1sum < u.vmdk)" = "$sum" ] || fail "a refused -u changed the image"
# -u -b "": standalone over zeros
ok "$DISKIMG" rebase -u -b "" u.vmdk
[ "$(jfield u.vmdk parent-cid)" = 4294967295 ] || fail "-u -b '': parentCID is not ffffffff"
edesc u.vmdk | grep -q parentFileNameHint && fail "-u -b '': the hint is still there"
[ "$(body u.vmdk)" = "$sum" ] || true
clean u.vmdk "-u -b ''"
qemu-img convert -O raw u.vmdk uz.raw
ok "$DISKIMG" convert -O raw u.vmdk uzd.raw
cmp -s uz.raw uzd.raw || fail "-u -b '': readers differ"
cmp -s uz.raw uq.raw && fail "-u -b '': the parent's bytes are still read"
# and back: -u names a parent where there was none
ok "$DISKIMG" rebase -u -b b1.vmdk -F vmdk u.vmdk
[ "$(jfield u.vmdk backing-filename)" = b1.vmdk ] || fail "-u onto b1 after standalone"
clean u.vmdk "-u back"

# safe mode: onto b2, onto the same parent, standalone
for nb in b2.vmdk b1.vmdk ""; do
    child s.vmdk
    qemu-img convert -O raw s.vmdk before.raw
    size0=$(stat -c %s s.vmdk); own0=$(own s.vmdk)
    ok "$DISKIMG" rebase -b "$nb" ${nb:+-F vmdk} s.vmdk
    clean s.vmdk "safe onto '$nb'"
    qcompare s.vmdk before.raw
    yal_top s.vmdk before.raw
    [ "$(jfield s.vmdk backing-filename)" = "$nb" ] || fail "safe: the parent is not '$nb'"
    case $nb in
        b1.vmdk)
            [ "$(stat -c %s s.vmdk)" = "$size0" ] || fail "onto the same parent: grains written" ;;
        b2.vmdk)
            # the grains b1 and b2 differ in, less those the image has:
            # 0..1.5M (b1 only, both different, b2 only) less the grain at
            # 64k (written in part) = 23 grains of 64 KiB
            [ $(( $(own s.vmdk) - own0 )) = $((23 * 65536)) ] ||
                fail "onto b2: $(( $(own s.vmdk) - own0 )) bytes written, not 23 grains"
            [ "$(jfield s.vmdk parent-cid)" = "$cid2" ] || fail "safe: parentCID" ;;
        "")
            [ "$(jfield s.vmdk parent-cid)" = 4294967295 ] || fail "-b '': parentCID"
            qemu-img info s.vmdk | grep -q "^backing file" && fail "-b '': still a backing file" ;;
    esac
done

# -p: progress on stderr, nothing on stdout
child p.vmdk
qemu-img convert -O raw p.vmdk before.raw
"$DISKIMG" rebase -p -b b2.vmdk -F vmdk p.vmdk >out 2>err || { cat err; fail "-p"; }
[ -s err ] && fail "-p printed on stderr: $(cat err)"
tr '\r' '\n' < out | grep -v '^$' > progress
grep -Evq '^    \([0-9]+\.[0-9]{2}/100%\)$' progress && fail "-p: not qemu-img's progress lines: $(cat out)"
[ "$(tail -n 1 progress)" = "    (100.00/100%)" ] || fail "-p: no final 100%"
qcompare p.vmdk before.raw

# every write failing in turn, and kills: the old parent or the new one,
# the content unchanged, qemu-img check clean
child t.vmdk
qemu-img convert -O raw t.vmdk before.raw
cp t.vmdk s.vmdk
DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" rebase -b b2.vmdk -F vmdk s.vmdk || fail "counting run"
read -r _ R _ W _ S _ < "$T/stats"
[ "$W" -gt 2 ] || fail "odd write count $W"
# (the writes: the grains, the two grain tables, the descriptor last; the
# first grain, one in the middle and the last four writes fail in turn)
for n in 1 $((W / 2)) $((W - 3)) $((W - 2)) $((W - 1)) $W; do
    cp t.vmdk s.vmdk
    expect_error "." env DISKIMG_FAULT=write:$n:EIO "$DISKIMG" rebase -b b2.vmdk -F vmdk s.vmdk
    clean s.vmdk "write $n failed"
    qcompare s.vmdk before.raw
    edesc s.vmdk | grep -q '^parentFileNameHint="b1.vmdk"$' || fail "write $n failed: not b1's child"
done
for ((n = 1; n <= S; n++)); do
    cp t.vmdk s.vmdk
    expect_error "." env DISKIMG_FAULT=sync:$n:EIO "$DISKIMG" rebase -b b2.vmdk -F vmdk s.vmdk
    clean s.vmdk "sync $n failed"
    qcompare s.vmdk before.raw
done
for wait in 0.1 0.35; do
    cp t.vmdk s.vmdk
    DISKIMG_FAULT=write:1+:delay20 "$DISKIMG" rebase -b b2.vmdk -F vmdk s.vmdk 2>/dev/null &
    pid=$!; sleep $wait; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    clean s.vmdk "killed after $wait"
    qcompare s.vmdk before.raw
    edesc s.vmdk | grep -Eq '^parentFileNameHint="b[12].vmdk"$' || fail "killed after $wait: parent"
done

# refusals, nothing written: a raw parent, -c, a streamOptimized image
child r.vmdk
sum=$(sha1sum < r.vmdk)
expect_error "must be a VMDK image \(-F vmdk\), not raw" "$DISKIMG" rebase -b b2.raw -F raw r.vmdk
expect_error "must be a VMDK image \('b2.raw' is raw\)" "$DISKIMG" rebase -u -b b2.raw -F vmdk r.vmdk
expect_error "only streamOptimized vmdk images hold compressed grains" \
    "$DISKIMG" rebase -c -b b2.vmdk -F vmdk r.vmdk
[ "$(sha1sum < r.vmdk)" = "$sum" ] || fail "a refused rebase changed the image"
qemu-img convert -O vmdk -o subformat=streamOptimized b1.raw so.vmdk
sum=$(sha1sum < so.vmdk)
expect_error "streamOptimized images cannot be rebased" "$DISKIMG" rebase -u -b b2.vmdk -F vmdk so.vmdk
expect_error "streamOptimized images cannot be" "$DISKIMG" rebase -b "" so.vmdk
[ "$(sha1sum < so.vmdk)" = "$sum" ] || fail "a refused streamOptimized rebase changed it"
echo "rebase-vmdk: ok"
