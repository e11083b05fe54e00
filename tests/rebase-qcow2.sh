#!/bin/bash
# diskimg rebase on qcow2 images made by qemu-img:
#   -u            the file is byte for byte qemu-img rebase -u's result (v2,
#                 v3, 512-byte clusters, an external data file; a new
#                 name, none, a longer one), qemu-img check clean
#   -b NEW -F FMT the guest view is unchanged (qemu-img compare with the
#                 content before), qemu-img check clean, the header names
#                 NEW; only what differs is written (nothing when NEW
#                 equals the old backing file)
#   -b ""         the image is standalone with the same content
#   -p            works (and prints only to stderr)
#   -c            the clusters copied in are compressed, the view the same
# The new backing file must be inside the image's folder unless
# --allow-external; qemu-img's messages and exit statuses for a missing
# -F, -b or file; a safe rebase failed at any write or killed midway keeps
# the old backing file and the content.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

backing() { qemu-img info --output=json "$1" | sed -n "s/^ *\"$2\": \"\(.*\)\",*/\1/p"; }
clean() { qemu-img check -U -q "$1" >/dev/null 2>&1 || { qemu-img check "$1"; fail "$2: qemu-img check"; }; }

qemu-img create -q -f qcow2 b1.qcow2 8M
qemu-io -c 'write -P 1 0 8M' b1.qcow2 >/dev/null
qemu-img create -q -f qcow2 b2.qcow2 8M
qemu-io -c 'write -P 1 0 2M' -c 'write -P 5 5M 100k' b2.qcow2 >/dev/null
qemu-img convert -O raw b1.qcow2 b1.raw
truncate -s 4M short.raw

# -u against qemu-img -u
for o in compat=1.1 compat=0.10 cluster_size=512 data_file=dd.raw; do
    rm -f h1.qcow2 dd.raw
    qemu-img create -q -f qcow2 -o "$o" -b b1.qcow2 -F qcow2 h1.qcow2
    cp h1.qcow2 h2.qcow2
    for b in "b2.qcow2 raw" ":" "a-much-longer-name-for-the-backing-file.qcow2 qcow2" "b1.qcow2 qcow2"; do
        name=${b% *}; fmt=${b#* }; [ "$b" = ":" ] && { name=""; fmt=""; }
        ok "$DISKIMG" rebase -u -b "$name" ${fmt:+-F $fmt} h1.qcow2
        qemu-img rebase -u -b "$name" ${fmt:+-F $fmt} h2.qcow2 || fail "qemu-img rebase -u $b"
        cmp h1.qcow2 h2.qcow2 || fail "$o -u -b '$name': differs from qemu-img's"
        [ -z "$name" ] || [ -e "$name" ] && clean h1.qcow2 "$o -u $b"
    done
done

# safe mode
for o in compat=1.1 compat=0.10,cluster_size=4k cluster_size=512 extended_l2=on,cluster_size=64k; do
    rm -f t.qcow2
    qemu-img create -q -f qcow2 -o "$o" -b b1.qcow2 -F qcow2 t.qcow2
    qemu-io -c 'write -P 9 1M 64k' -c 'write -z 6M 64k' -c 'write -P 8 7M 4k' t.qcow2 >/dev/null
    qemu-img convert -O raw t.qcow2 before.raw
    for nb in "b2.qcow2 qcow2" "b1.raw raw" "short.raw raw" "b1.qcow2 qcow2"; do
        name=${nb% *}; fmt=${nb#* }
        cp t.qcow2 s.qcow2
        ok "$DISKIMG" rebase -b "$name" -F "$fmt" s.qcow2
        clean s.qcow2 "$o rebase onto $name"
        qcompare s.qcow2 before.raw
        [ "$(backing s.qcow2 backing-filename)" = "$name" ] || fail "$o: backing is not $name"
        [ "$(backing s.qcow2 backing-filename-format)" = "$fmt" ] || fail "$o: format is not $fmt"
    done
    # the same content as the old backing file: nothing is written
    cp t.qcow2 s.qcow2
    ok "$DISKIMG" rebase -b b1.raw -F raw s.qcow2
    [ "$(stat -c %s s.qcow2)" = "$(stat -c %s t.qcow2)" ] || fail "$o: data written onto an equal backing"
    # standalone
    cp t.qcow2 s.qcow2
    ok "$DISKIMG" rebase -p -b "" s.qcow2 > out
    # not a terminal: qemu-img's progress lines, ending at 100%
    tr '\r' '\n' < out | grep -v '^$' > progress
    grep -Evq '^    \([0-9]+\.[0-9]{2}/100%\)$' progress && fail "-p: not qemu-img's progress lines: $(cat out)"
    [ "$(tail -n 1 progress)" = "    (100.00/100%)" ] || fail "-p: no final 100%: $(cat out)"
    clean s.qcow2 "$o -b ''"
    qcompare s.qcow2 before.raw
    [ -z "$(backing s.qcow2 backing-filename)" ] || fail "$o: still has a backing file"
    # chained back onto b1: same content again
    ok "$DISKIMG" rebase -b b1.qcow2 -F qcow2 s.qcow2
    qcompare s.qcow2 before.raw
    clean s.qcow2 "$o back onto b1"
done

# -c: the clusters copied in are compressed
qemu-img create -q -f qcow2 -b b1.qcow2 -F qcow2 t.qcow2
qemu-io -c 'write -P 9 1M 64k' t.qcow2 >/dev/null
qemu-img convert -O raw t.qcow2 before.raw
cp t.qcow2 s.qcow2
ok "$DISKIMG" rebase -c -b "" s.qcow2
clean s.qcow2 "-c"
qcompare s.qcow2 before.raw
qemu-img check s.qcow2 | grep -Eq ' [1-9][0-9.]*% compressed' || fail "-c: nothing compressed"
cp t.qcow2 s.qcow2
ok "$DISKIMG" rebase -c -b b2.qcow2 -F qcow2 s.qcow2
clean s.qcow2 "-c onto b2"
qcompare s.qcow2 before.raw

# internal snapshots: a warning (they read the backing file too), the
# current content kept; an external data file: refused, unchanged
qemu-img create -q -f qcow2 -b b1.qcow2 -F qcow2 sn.qcow2
qemu-io -c 'write -P 4 0 64k' sn.qcow2 >/dev/null
qemu-img snapshot -c s sn.qcow2
qemu-img convert -O raw sn.qcow2 before.raw
"$DISKIMG" rebase -b b2.qcow2 -F qcow2 sn.qcow2 2> err || { cat err; fail "rebase with snapshots"; }
grep -q "warning: sn.qcow2 has internal snapshots" err || fail "no warning about snapshots"
clean sn.qcow2 "with snapshots"
qcompare sn.qcow2 before.raw
qemu-img create -q -f qcow2 -o data_file=df.raw -b b1.qcow2 -F qcow2 df.qcow2
sum=$(sha1sum < df.qcow2)
expect_error "external data file" "$DISKIMG" rebase -b "" df.qcow2
[ "$(sha1sum < df.qcow2)" = "$sum" ] || fail "data file image changed"

# interrupted safe rebases keep the old backing file and the content
qemu-img create -q -f qcow2 -o cluster_size=4k -b b1.qcow2 -F qcow2 t.qcow2
qemu-io -c 'write -P 9 1M 64k' t.qcow2 >/dev/null
qemu-img convert -O raw t.qcow2 before.raw
cp t.qcow2 s.qcow2
DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" rebase -b "" s.qcow2 || fail "counting run"
read -r _ R _ W _ S _ < "$T/stats"
for ((n = 1; n <= W; n += (W > 40 ? W / 20 : 1))); do
    cp t.qcow2 s.qcow2
    expect_error "." env DISKIMG_FAULT=write:$n:EIO "$DISKIMG" rebase -b "" s.qcow2
    qemu-img check -q s.qcow2 >/dev/null 2>&1; rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || { qemu-img check s.qcow2; fail "write $n failed: not clean"; }
    qcompare s.qcow2 before.raw
    b=$(backing s.qcow2 backing-filename)
    [ "$b" = b1.qcow2 ] || [ -z "$b" ] || fail "write $n failed: backing '$b'"
done
for wait in 0.1 0.3; do
    cp t.qcow2 s.qcow2
    DISKIMG_FAULT=write:1+:delay20 "$DISKIMG" rebase -b "" s.qcow2 2>/dev/null &
    pid=$!; sleep $wait; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    qemu-img check -q s.qcow2 >/dev/null 2>&1; rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || { qemu-img check s.qcow2; fail "killed after $wait: not clean"; }
    qcompare s.qcow2 before.raw
done

# the reference rule and qemu-img's errors
mkdir -p sub
qemu-img create -q -f qcow2 -b ../b1.qcow2 -F qcow2 sub/in.qcow2
cp b2.qcow2 /tmp/rebase-outside-$$.qcow2 2>/dev/null || true
sum=$(sha1sum < t.qcow2)
expect_error "outside" "$DISKIMG" rebase -u -b ../x.qcow2 -F qcow2 t.qcow2
expect_error "outside" "$DISKIMG" rebase -u -b /etc/x.qcow2 -F qcow2 t.qcow2
expect_error "outside" "$DISKIMG" rebase -b "$T/../x.qcow2" -F qcow2 t.qcow2
[ "$(sha1sum < t.qcow2)" = "$sum" ] || fail "a refused rebase changed the image"
ok "$DISKIMG" rebase --allow-external -u -b ../b2.qcow2 -F qcow2 sub/in.qcow2
[ "$(backing sub/in.qcow2 backing-filename)" = ../b2.qcow2 ] || fail "--allow-external -u"
expect_error "Could not change the backing file to 'b2.qcow2': backing format must be specified" \
    "$DISKIMG" rebase -b b2.qcow2 t.qcow2
expect_error "Could not change the backing file to 'b2.qcow2': backing format must be specified" \
    "$DISKIMG" rebase -u -b b2.qcow2 t.qcow2
expect_error "Must specify backing file \(-b\) or use unsafe mode \(-u\)" "$DISKIMG" rebase t.qcow2
expect_error "Could not open new backing file 'nonexist.qcow2'" \
    "$DISKIMG" rebase -b nonexist.qcow2 -F qcow2 t.qcow2
[ "$(sha1sum < t.qcow2)" = "$sum" ] || fail "a failed rebase changed the image"
ok "$DISKIMG" rebase -u -b nonexist.qcow2 -F qcow2 t.qcow2   # -u: need not exist
# a VMDK target takes only a VMDK parent (tests/rebase-vmdk*.sh for the rest)
qemu-img create -q -f vmdk vb.vmdk 4M
qemu-img create -q -f vmdk -b vb.vmdk -F vmdk vt.vmdk
sum=$(sha1sum < vt.vmdk)
expect_error "the parent of a VMDK image must be a VMDK image \(-F vmdk\), not raw" \
    "$DISKIMG" rebase -u -b b1.raw -F raw vt.vmdk
expect_error "the parent of a VMDK image must be a VMDK image \(-F vmdk\), not raw" \
    "$DISKIMG" rebase -b b1.raw -F raw vt.vmdk
[ "$(sha1sum < vt.vmdk)" = "$sum" ] || fail "a refused vmdk rebase changed the image"
"$DISKIMG" rebase --help | grep -q "^Usage: diskimg rebase" || fail "--help"
rm -f /tmp/rebase-outside-$$.qcow2
echo "rebase-qcow2: ok"
