#!/bin/bash
# VHDX logs.  testdata/vhdx-dirty-log.vhdx.bz2 is an image qemu-io was
# killed in the middle of writing (testdata/README.md): qemu-img 7.2 will
# not open it read-only.  Read-only, diskimg reads it through its log:
# info, convert and compare give the content qemu-img shows after
# `check -r all` on a copy (its recorded digest), the file stays unchanged,
# and without the log the content would differ.  check reports the pending
# log (exit 2); check -r all replays it into the file like qemu-img (same
# output), after which qemu-img opens it, finds no errors and reads the
# same content.  Logs laid out from the specification (tests/tools/
# vhdxmake.py: several entries, a sequence that wraps around the end of the
# ring, an older sequence beside the active one, block data and zero
# descriptors in the log, sectors written twice (the later write wins),
# 4096-byte sectors) read as the generator says,
# as qemu-img reads them after its own replay (where it can), and replay
# with check -r all.
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3
need bzip2
MK="python3 $TOP/tests/tools/vhdxmake.py"
PATCH="python3 $TOP/tests/tools/vhdxpatch.py"
want=c1ee1dc84a60acb3682b242fb83da865b51c3112c44caf69a50c9ee94ecea8d4

bzip2 -dc "$TOP/testdata/vhdx-dirty-log.vhdx.bz2" > "$T/dirty.vhdx" || fail "bunzip2"
before=$(sha256sum < "$T/dirty.vhdx")
# qemu-img needs the log replayed first
qemu-img info "$T/dirty.vhdx" > /dev/null 2>&1 && fail "qemu-img opens the dirty image read-only"
ok "$DISKIMG" info --output=json "$T/dirty.vhdx" > "$T/info.json"
grep -q '"dirty-flag": true' "$T/info.json" || fail "dirty-flag not set"
grep -q '"virtual-size": 67108864' "$T/info.json" || fail "virtual size"
ok "$DISKIMG" convert -O raw "$T/dirty.vhdx" "$T/d.raw"
[ "$(sha256sum < "$T/d.raw" | cut -d' ' -f1)" = $want ] || fail "replayed content differs"
ok "$DISKIMG" compare "$T/dirty.vhdx" "$T/d.raw"
ok "$DISKIMG" map --output=json "$T/dirty.vhdx" > /dev/null
[ "$(sha256sum < "$T/dirty.vhdx")" = "$before" ] || fail "the dirty image was written"
# the log matters: without it block 3 is lost
cp "$T/dirty.vhdx" "$T/nolog.vhdx"
$PATCH "$T/nolog.vhdx" hdr.both.log_guid=zero
ok "$DISKIMG" convert -O raw "$T/nolog.vhdx" "$T/n.raw"
cmp -s "$T/n.raw" "$T/d.raw" && fail "the log changes nothing: a useless test image"

# check: the log is pending (corruption); -r all replays it as qemu-img does
rc=0
"$DISKIMG" check "$T/dirty.vhdx" > "$T/c.out" 2> "$T/c.err" || rc=$?
[ $rc = 2 ] || fail "check of a dirty image: exit $rc"
grep -q "log holds writes not yet replayed" "$T/c.err" || fail "check names no log"
cp "$T/dirty.vhdx" "$T/q.vhdx"
cp "$T/dirty.vhdx" "$T/r.vhdx"
qemu-img check -r all "$T/q.vhdx" > "$T/q.out" 2>&1 || fail "qemu-img check -r all"
rc=0
"$DISKIMG" check -r all "$T/r.vhdx" > "$T/r.out" 2> "$T/r.err" || rc=$?
[ $rc = 0 ] || { cat "$T/r.err"; fail "check -r all: exit $rc"; }
diff "$T/q.out" "$T/r.out" || fail "check -r all output differs from qemu-img's"
qemu-img check "$T/r.vhdx" > /dev/null || fail "qemu-img check after our replay"
qemu-img convert -O raw "$T/r.vhdx" "$T/r.raw"
[ "$(sha256sum < "$T/r.raw" | cut -d' ' -f1)" = $want ] || fail "content after our replay"
ok "$DISKIMG" info --output=json "$T/r.vhdx" | grep -q '"dirty-flag": false' ||
    fail "still dirty after check -r all"
ok "$DISKIMG" check "$T/r.vhdx"

# logs from the specification
M=1048576
n=0
for opts in "--log 1 --log-overwrite" "--log 3 --log-overwrite --log-zero" "--log 2 --log-wrap" "--log 1 --log-wrap" \
            "--log 3 --log-wrap --log-data" "--log 2 --log-stale --log-zero" \
            "--log 4 --log-data --log-zero --log-stale" "--log 2 --sector 4096 --log-data" \
            "--log 2 --type diff --log-data --log-size 8388608"; do
    n=$((n + 1))
    img=$T/g$n.vhdx
    extra=
    case $opts in *diff*) extra="--parent $T/g1.vhdx --parent-raw $T/g1.exp --loc relative_path=.\\g1.vhdx" ;; esac
    $MK "$img" --size $((12 * M + 4096)) --block $((2 * M)) --write 0:8192:0x11 \
        --write $((5 * M)):4096:0x22 --write $((12 * M)):4096:0x33 --expect "$T/g$n.exp" \
        $opts $extra || fail "vhdxmake $opts"
    sum=$(sha256sum < "$img")
    ok "$DISKIMG" convert -O raw "$img" "$T/o.raw"
    cmp "$T/o.raw" "$T/g$n.exp" || fail "$opts: content differs from the layout's"
    [ "$(sha256sum < "$img")" = "$sum" ] || fail "$opts: the image was written"
    cp "$img" "$T/w.vhdx"
    ok "$DISKIMG" check -r all "$T/w.vhdx" > /dev/null
    # qemu-img reads no differencing disk and no 4096-byte sectors
    case $opts in *diff*|*4096*) qemu=no ;; *) qemu=yes ;; esac
    [ $qemu = no ] || qemu-img check "$T/w.vhdx" > /dev/null 2>&1 ||
        fail "$opts: qemu-img check after our replay"
    ok "$DISKIMG" convert -O raw "$T/w.vhdx" "$T/o.raw"
    cmp "$T/o.raw" "$T/g$n.exp" || fail "$opts: content after check -r all"
    # qemu-img's own replay (nor a sequence of three or more entries
    # across the end of the ring)
    case $opts in *"--log 3 --log-wrap"*) continue ;; esac
    [ $qemu = yes ] || continue
    cp "$img" "$T/qw.vhdx"
    qemu-img check -r all "$T/qw.vhdx" > /dev/null 2>&1 || fail "$opts: qemu-img check -r all"
    qcompare "$T/qw.vhdx" "$T/g$n.exp"
done
echo ok
