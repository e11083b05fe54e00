#!/bin/bash
# A DISKIMG_FAULT value that does not parse (a typo in a test) stops the
# program before any I/O with status 1 and a message naming the rule: no
# abort (library code never aborts), no output, the input untouched.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/o"
qemu-img create -q -f qcow2 "$T/in.qcow2" 1M
sum=$(md5sum < "$T/in.qcow2")
for spec in 'read:x:EIO' 'write:1:EIO,bogus:1:EIO' 'write:1:ENOTANERRNO' 'sync:0:EIO' \
            'write:1:delay0' 'read'; do
    expect_error "DISKIMG_FAULT: .*$(printf '%s' "${spec##*,}" | sed 's/[.[*^$]/\\&/g')" \
        env DISKIMG_FAULT="$spec" "$DISKIMG" convert -O raw "$T/in.qcow2" "$T/o/out.raw"
    [ -z "$(ls -A "$T/o")" ] || fail "$spec: output left: $(ls -A "$T/o")"
    expect_error "DISKIMG_FAULT" env DISKIMG_FAULT="$spec" "$DISKIMG" info "$T/in.qcow2"
    [ -s "$T/stdout" ] && fail "$spec: info printed: $(cat "$T/stdout")"
done
[ "$(md5sum < "$T/in.qcow2")" = "$sum" ] || fail "the input changed"
# a good spec still works, and a rule that never fires changes nothing
DISKIMG_FAULT=write:1000000:EIO "$DISKIMG" convert -O raw "$T/in.qcow2" "$T/o/out.raw" ||
    fail "convert under a rule that never fires"
qcompare "$T/in.qcow2" "$T/o/out.raw"
