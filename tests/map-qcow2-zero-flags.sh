#!/bin/bash
# map on qcow2: the zero flag as qemu-img map 7.2 reports it.
#  - a zero cluster that keeps its host cluster: zero, not data, with offset
#  - a data cluster only partly written by qemu (the rest of the host
#    cluster is a hole of the file): plain data, not zero; qemu-img reports
#    file holes under data clusters as zero only for images it detects as
#    preallocated (preallocation=metadata, see map-qcow2.sh)
#  - extended L2: an unallocated subcluster of an allocated cluster has no
#    data and reads as zero, but keeps its host offset
# compare -s compares the same flags, so it is checked here too.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io

qemu-img create -q -f qcow2 "$T/probe.qcow2" 1M
# a qcow2 image qemu-img made must be readable: a failure here is a failure
"$DISKIMG" map "$T/probe.qcow2" > /dev/null 2> "$T/probe.err" ||
    { cat "$T/probe.err" >&2; fail "map cannot read a qcow2 image qemu-img made"; }

same_as_qemu_compare() {
    local qrc=0 drc=0
    qemu-img compare "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" compare "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    [ $qrc = $drc ] || { cat "$T/d.out" "$T/d.err"; fail "compare $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" || fail "compare $*: output differs from qemu-img"
}
same_as_qemu() {
    local qrc=0 drc=0
    qemu-img map "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" map "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: map $*"; }
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "map $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "map $*: output differs from qemu-img"; }
}
qio() { qemu-io "$@" > /dev/null || fail "qemu-io $*"; }

cd "$T" || fail "cd"
qemu-img create -q -f qcow2 z.qcow2 2M
qio -c "write -P 1 0 256k" -c "write -z 64k 64k" -c "write -z -u 192k 64k" z.qcow2
same_as_qemu --output=json z.qcow2
same_as_qemu z.qcow2

qemu-img create -q -f qcow2 part.qcow2 8M
qio -c "write -P 7 7M 4k" -c "write -P 8 64k 512" part.qcow2
same_as_qemu --output=json part.qcow2
same_as_qemu part.qcow2

qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=64k x.qcow2 2M
qio -c "write -P 1 0 4k" -c "write -P 1 32k 4k" -c "write -z 1M 8k" x.qcow2
same_as_qemu --output=json x.qcow2
same_as_qemu x.qcow2

for img in z part x; do
    qemu-img convert -O raw $img.qcow2 $img.raw
    qemu-img convert -O qcow2 $img.qcow2 $img-copy.qcow2
    same_as_qemu_compare -s $img.qcow2 $img.raw
    same_as_qemu_compare -s $img.raw $img.qcow2
    same_as_qemu_compare -s $img.qcow2 $img-copy.qcow2
done
exit 0
