#!/bin/bash
# A VHDX whose log does not replay is refused (exit 1, the file and the
# problem named, no output); `convert --salvage` reads it as the file holds
# it, without the log, with a warning naming the file.  Cases: qemu-io's
# killed write (testdata/vhdx-dirty-log.vhdx.bz2) whose header is made to
# name another log GUID than its entries carry, and a clean qemu-img image
# whose header names a log that is not there.  The salvaged content is what
# qemu-img reads from the same file with the log GUID cleared.  An image
# that cannot be read without its log (its BAT and parameters are only in
# the log) stays refused under --salvage, and `check -r all` still refuses
# to replay such a log into the file.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
need bzip2
PATCH="python3 $TOP/tests/tools/vhdxpatch.py"
MK="python3 $TOP/tests/tools/vhdxmake.py"

bzip2 -dc "$TOP/testdata/vhdx-dirty-log.vhdx.bz2" > "$T/dirty.vhdx" || fail "bunzip2"
qemu-img create -q -f vhdx -o log_size=1M "$T/clean.vhdx" 8M || fail "qemu-img create"
qemu-io -f vhdx -c 'write -P 0x5c 0 1M' -c 'write -P 0x3d 5M 64k' "$T/clean.vhdx" > /dev/null ||
    fail "qemu-io"

for name in dirty clean; do
    cp "$T/$name.vhdx" "$T/$name-bad.vhdx"
    cp "$T/$name.vhdx" "$T/$name-nolog.vhdx"
    $PATCH "$T/$name-bad.vhdx" hdr.both.log_guid=new || fail "vhdxpatch $name"
    $PATCH "$T/$name-nolog.vhdx" hdr.both.log_guid=zero || fail "vhdxpatch $name"
    before=$(sha256sum < "$T/$name-bad.vhdx")
    mkdir "$T/out-$name"
    rc=0
    "$DISKIMG" convert -O raw "$T/$name-bad.vhdx" "$T/out-$name/a.raw" 2> "$T/err" || rc=$?
    [ $rc = 1 ] || fail "$name: convert of a log that does not replay: exit $rc"
    grep -q "$name-bad.vhdx: the header names a log, but the log holds no valid entry sequence" \
        "$T/err" || { cat "$T/err"; fail "$name: message"; }
    [ -z "$(ls -A "$T/out-$name")" ] || fail "$name: output left: $(ls -A "$T/out-$name")"
    "$DISKIMG" convert --salvage -O raw "$T/$name-bad.vhdx" "$T/out-$name/a.raw" 2> "$T/err" ||
        { cat "$T/err"; fail "$name: convert --salvage failed"; }
    grep -q "$name-bad.vhdx: .*no valid entry sequence.*read without its log (--salvage)" "$T/err" ||
        { cat "$T/err"; fail "$name: no warning naming the file"; }
    qemu-img compare -q -f raw -F vhdx "$T/out-$name/a.raw" "$T/$name-nolog.vhdx" ||
        fail "$name: the salvaged content is not the file's without its log"
    [ "$(sha256sum < "$T/$name-bad.vhdx")" = "$before" ] || fail "$name: the source changed"
done
# the clean image's content is its data, as qemu-img reads the unpatched file
qemu-img compare -q -f raw -F vhdx "$T/out-clean/a.raw" "$T/clean.vhdx" || fail "clean: content"

# without the log there is no image: refused all the same, nothing left
$MK "$T/only-log.vhdx" --size $((1 << 20)) --log 2 --corrupt log-crc --write 0:4096:0x21 ||
    fail vhdxmake
mkdir "$T/out-only"
rc=0
"$DISKIMG" convert --salvage -O raw "$T/only-log.vhdx" "$T/out-only/a.raw" 2> "$T/err" || rc=$?
[ $rc = 1 ] || fail "only-log: exit $rc"
grep -q "only-log.vhdx: " "$T/err" || { cat "$T/err"; fail "only-log: message"; }
[ -z "$(ls -A "$T/out-only")" ] || fail "only-log: output left"
before=$(sha256sum < "$T/only-log.vhdx")
rc=0
"$DISKIMG" check -r all "$T/only-log.vhdx" > /dev/null 2> "$T/err" || rc=$?
[ $rc = 1 ] || fail "check -r all of a log that does not replay: exit $rc"
[ "$(sha256sum < "$T/only-log.vhdx")" = "$before" ] || fail "check -r all wrote the image"
echo ok
