#!/bin/bash
# diskimg snapshot on qcow2 images made by qemu-img: -l prints qemu-img
# snapshot -l's table byte for byte (0, 1 and several snapshots); -c, -a
# and -d on several layouts (cluster sizes, refcount widths, extended L2,
# v2, compressed clusters, a backing file) leave images qemu-img check
# finds clean (no leaks either), whose active content is unchanged by -c
# and -d and equals qemu-img snapshot -a's result on a copy after -a, whose
# snapshots read back what was snapshotted, and that qemu-img keeps
# working with (writes after a snapshot, its own -d).  Exit statuses and
# messages follow qemu-img's.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

clean() { qemu-img check -q "$1" >/dev/null 2>&1 || { qemu-img check "$1"; fail "$2: qemu-img check"; }; }
same_list() {
    qemu-img snapshot -l "$1" > ref.list || fail "qemu-img snapshot -l $1"
    "$DISKIMG" snapshot -l "$1" > mine.list 2> err || { cat err; fail "snapshot -l $1"; }
    cmp ref.list mine.list || { diff ref.list mine.list; fail "$1: list differs from qemu-img's"; }
    # no action lists too
    "$DISKIMG" snapshot "$1" | cmp - ref.list || fail "$1: snapshot without -l"
}
run() { ok "$DISKIMG" snapshot "$@"; grep -q "AddressSanitizer\|runtime error" "$T/stderr.ok" && fail "sanitizer: $*"; return 0; }
# snapread IMG SNAP OUT: the snapshot's content, by qemu-img
snapread() { qemu-img convert -O raw -l "snapshot.name=$2" "$1" "$3" || fail "read snapshot $2 of $1"; }

# listing: none, one, several (qemu-img's own snapshots)
qemu-img create -q -f qcow2 e.qcow2 64M
same_list e.qcow2
[ -z "$("$DISKIMG" snapshot -l e.qcow2)" ] || fail "an image without snapshots lists something"
qemu-img snapshot -c one e.qcow2
same_list e.qcow2
qemu-img snapshot -c "two words" e.qcow2
qemu-img snapshot -c one e.qcow2
qemu-img snapshot -c "" e.qcow2
same_list e.qcow2

for o in "" cluster_size=512 cluster_size=2M refcount_bits=2 refcount_bits=64 \
         extended_l2=on,cluster_size=32k compat=0.10,cluster_size=4k; do
    rm -f a.qcow2
    qemu-img create -q -f qcow2 ${o:+-o "$o"} a.qcow2 32M
    qemu-io -c 'write -P 1 0 1M' -c 'write -P 2 5M 100k' -c 'write -z 8M 1M' a.qcow2 >/dev/null
    qemu-img convert -O raw a.qcow2 v1.raw
    run -c s1 a.qcow2
    clean a.qcow2 "$o -c s1"
    same_list a.qcow2
    qcompare a.qcow2 v1.raw
    # qemu writes into the image after the snapshot: copy on write
    qemu-io -c 'write -P 3 0 64k' -c 'write -P 4 20M 1M' -c 'discard 5M 100k' a.qcow2 >/dev/null
    clean a.qcow2 "$o after writes"
    qemu-img convert -O raw a.qcow2 v2.raw
    snapread a.qcow2 s1 s1.raw
    cmp s1.raw v1.raw || fail "$o: snapshot s1 does not hold the content at -c"
    run -c s2 a.qcow2
    clean a.qcow2 "$o -c s2"
    same_list a.qcow2
    # apply, against qemu-img's on a copy
    cp a.qcow2 q.qcow2
    run -a s1 a.qcow2
    clean a.qcow2 "$o -a s1"
    # qemu-img raises the snapshot's refcounts before lowering the active
    # ones: with 2-bit refcounts (3 references at most) it fails; we do not
    if qemu-img snapshot -a s1 q.qcow2 2>/dev/null; then
        qcompare a.qcow2 q.qcow2
    else
        [ "$o" = refcount_bits=2 ] || fail "$o: qemu-img snapshot -a failed"
    fi
    qcompare a.qcow2 v1.raw
    qemu-io -c 'write -P 5 2M 64k' a.qcow2 >/dev/null
    clean a.qcow2 "$o write after -a"
    snapread a.qcow2 s1 s1.raw
    cmp s1.raw v1.raw || fail "$o: s1 changed by a write after -a"
    # delete: the active content and the other snapshot stay
    qemu-img convert -O raw a.qcow2 v3.raw
    run -d s1 a.qcow2
    clean a.qcow2 "$o -d s1"
    qcompare a.qcow2 v3.raw
    snapread a.qcow2 s2 s2.raw
    cmp s2.raw v2.raw || fail "$o: s2 changed by -d s1"
    same_list a.qcow2
    run -a 2 a.qcow2                  # by ID
    qcompare a.qcow2 v2.raw
    run -d s2 a.qcow2
    clean a.qcow2 "$o -d s2"
    qcompare a.qcow2 v2.raw
    [ -z "$("$DISKIMG" snapshot -l a.qcow2)" ] || fail "$o: snapshots left"
    # qemu-img deletes one of ours
    run -c s3 a.qcow2
    qemu-img snapshot -d s3 a.qcow2 || fail "$o: qemu-img snapshot -d of ours"
    clean a.qcow2 "$o qemu-img -d"
done

# compressed clusters, a backing file, several snapshots sharing clusters
qemu-img create -q -f qcow2 base.qcow2 16M
qemu-io -c 'write -P 7 0 16M' base.qcow2 >/dev/null
qemu-img convert -c -O qcow2 base.qcow2 c.qcow2
qemu-img create -q -f qcow2 -b c.qcow2 -F qcow2 top.qcow2
qemu-io -c 'write -P 8 1M 64k' top.qcow2 >/dev/null
for img in c.qcow2 top.qcow2; do
    qemu-img convert -O raw $img before.raw
    run -c x $img; run -c y $img; run -c x $img
    clean $img "$img three snapshots"
    same_list $img
    qemu-io -c 'write -P 9 0 128k' $img >/dev/null
    cp $img q.qcow2
    run -a y $img; qemu-img snapshot -a y q.qcow2
    qcompare $img q.qcow2
    qcompare $img before.raw
    run -d x $img; run -d x $img; run -d y $img
    clean $img "$img all deleted"
    qcompare $img before.raw
done

# persistent bitmaps keep their clusters and stay listed
qemu-img create -q -f qcow2 bm.qcow2 16M
qemu-io -c 'write -P 1 0 1M' bm.qcow2 >/dev/null
qemu-img bitmap --add bm.qcow2 b0
run -c s bm.qcow2; clean bm.qcow2 "bitmap -c"
run -a s bm.qcow2; clean bm.qcow2 "bitmap -a"
run -d s bm.qcow2; clean bm.qcow2 "bitmap -d"
qemu-img info --output=json bm.qcow2 | grep -q '"name": "b0"' || fail "bitmap lost"

# exit statuses and messages (qemu-img's)
qemu-img create -q -f qcow2 s.qcow2 1M
expect_error "Could not delete snapshot 'nope': snapshot not found" "$DISKIMG" snapshot -d nope s.qcow2
expect_error "Could not apply snapshot 'nope': Failed to load snapshot: No such file or directory" \
    "$DISKIMG" snapshot -a nope s.qcow2
expect_error "Cannot mix" "$DISKIMG" snapshot -l -c x s.qcow2
expect_error "Expecting one image file name" "$DISKIMG" snapshot -l
expect_error "Expecting one image file name" "$DISKIMG" snapshot -l s.qcow2 s.qcow2
run -q -c x s.qcow2
[ -s "$T/stderr.ok" ] && fail "-q printed something"
# -d takes a name only (qemu-img 7.2), -a an ID or a name
expect_error "Could not delete snapshot '1': snapshot not found" "$DISKIMG" snapshot -d 1 s.qcow2
run -a 1 s.qcow2
run -d x s.qcow2
clean s.qcow2 "-d x"
"$DISKIMG" snapshot --help | grep -q "^Usage: diskimg snapshot" || fail "--help"
qemu-img create -q -f raw r.raw 1M
[ -z "$("$DISKIMG" snapshot -l -f raw r.raw)" ] || fail "raw lists snapshots"
expect_error "Could not create snapshot 'x': -95 \(Operation not supported\)" \
    "$DISKIMG" snapshot -f raw -c x r.raw
ok true
echo "snapshot-qcow2: ok"
