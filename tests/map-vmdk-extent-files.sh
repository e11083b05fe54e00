#!/bin/bash
# map and compare -s on vmdk descriptors with separate extent files:
#  - allocated grains of a sparse extent file have their offset in that file,
#    and the human form names the file as qemu-img does (the extent name
#    joined to the folder of the name the descriptor was given by)
#  - qemu-img reports every range of a flat extent as data with its offset
#    in the extent file, and the holes of that file as data that reads as
#    zero (zero and data both true).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
S=$SHARED/samples/vmdk
[ -d "$S" ] || skip "no samples at $S"

qemu-img create -q -f vmdk "$T/probe.vmdk" 1M
# a vmdk image qemu-img made must be readable: a failure here is a failure
"$DISKIMG" map "$T/probe.vmdk" > /dev/null 2> "$T/probe.err" ||
    { cat "$T/probe.err" >&2; fail "map cannot read a vmdk image qemu-img made"; }

same_as_qemu() {   # same_as_qemu map|compare ARGS...
    local qrc=0 drc=0 cmd=$1; shift
    qemu-img $cmd "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" $cmd "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: $cmd $*"; }
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "$cmd $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "$cmd $*: output differs from qemu-img"; }
}

qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse "$T/split.vmdk" 8M
qemu-io -c "write -P 6 2M 128k" -c "write -P 7 0 64k" "$T/split.vmdk" > /dev/null || fail "qemu-io"
(cd "$S" && same_as_qemu map --output=json vmdk-rs/twoGbMaxExtentSparse.vmdk &&
    same_as_qemu map vmdk-rs/twoGbMaxExtentSparse.vmdk &&
    qemu-img convert -O raw vmdk-rs/twoGbMaxExtentSparse.vmdk "$T/two.raw" &&
    same_as_qemu compare -s vmdk-rs/twoGbMaxExtentSparse.vmdk "$T/two.raw") || exit 1
same_as_qemu map "$S/vmdk-rs/twoGbMaxExtentSparse.vmdk"
same_as_qemu map --output=json "$T/split.vmdk"
(cd "$T" && same_as_qemu map split.vmdk) || exit 1
qemu-img convert -O raw "$T/split.vmdk" "$T/split.raw"
same_as_qemu compare -s "$T/split.raw" "$T/split.vmdk"

qemu-img create -q -f vmdk -o subformat=monolithicFlat "$T/mf.vmdk" 4M
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentFlat "$T/tf.vmdk" 4M
for img in mf tf; do
    qemu-io -c "write -P 1 1M 64k" -c "write -P 2 3M 4k" "$T/$img.vmdk" > /dev/null || fail "qemu-io"
done
(cd "$S" && same_as_qemu map --output=json vmdk-rs/vmfs_thick.vmdk && same_as_qemu map vmdk-rs/vmfs_thick.vmdk &&
    qemu-img convert -O raw vmdk-rs/vmfs_thick.vmdk "$T/vmfs.raw" &&
    same_as_qemu compare vmdk-rs/vmfs_thick.vmdk "$T/vmfs.raw" &&
    same_as_qemu compare -s vmdk-rs/vmfs_thick.vmdk "$T/vmfs.raw") || exit 1
for img in mf tf; do
    same_as_qemu map --output=json "$T/$img.vmdk"
    same_as_qemu map "$T/$img.vmdk"
    qemu-img convert -O raw "$T/$img.vmdk" "$T/$img.raw"
    same_as_qemu compare "$T/$img.vmdk" "$T/$img.raw"
    same_as_qemu compare -s "$T/$img.vmdk" "$T/$img.raw"
done
exit 0
