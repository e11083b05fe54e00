#!/bin/bash
# map on qcow2 images made by qemu-img/qemu-io prints exactly what qemu-img
# map prints: data, zero clusters, unallocated ranges, a three-deep backing
# chain of different sizes (depth, present, the file names of the human
# form), compressed clusters (no offset; the human form refuses them),
# metadata preallocation, small fragmented clusters, windows, and a 100 GiB
# image in a few block-status calls.  Zero flags qemu-img derives from the
# host file or from allocated-but-zero clusters: map-qcow2-zero-flags.sh.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io

qemu-img create -q -f qcow2 "$T/probe.qcow2" 1M
# a qcow2 image qemu-img made must be readable: a failure here is a failure
"$DISKIMG" map "$T/probe.qcow2" > /dev/null 2> "$T/probe.err" ||
    { cat "$T/probe.err" >&2; fail "map cannot read a qcow2 image qemu-img made"; }

same_as_qemu() {
    local qrc=0 drc=0
    qemu-img map "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" map "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: map $*"; }
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "map $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "map $*: output differs from qemu-img"; }
}
qio() { qemu-io "$@" > /dev/null || fail "qemu-io $*"; }
both_forms() {
    same_as_qemu --output=json "$@"
    same_as_qemu "$@"
}

cd "$T" || fail "cd"
# a chain: base 4M <- mid 6M <- top 8M, each layer with data, zero clusters
# and holes; top's tail lies past mid's end, mid's past base's end
qemu-img create -q -f qcow2 base.qcow2 4M
qio -c "write -P 1 0 1M" -c "write -z 1M 512k" -c "write -P 2 3M 64k" -c "write -P 5 3968k 128k" base.qcow2
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 mid.qcow2 6M
qio -c "write -P 3 512k 64k" -c "write -z 2M 128k" -c "write -P 6 5M 64k" mid.qcow2
qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2 8M
qio -c "write -P 4 0 64k" -c "write -z 1536k 64k" -c "write -P 7 7M 64k" top.qcow2
for img in top mid base; do both_forms $img.qcow2; done
# names in the human form follow the path the top was given by
both_forms "$T/top.qcow2"
both_forms ./top.qcow2
mkdir -p sub && (cd sub && same_as_qemu ../top.qcow2) || exit 1
for win in "--start-offset 64k --max-length 1M" "--start-offset 3M" "--start-offset 4100k --max-length 2M" \
           "--start-offset 7M --max-length 1" "--start-offset 8M" "--max-length 0"; do
    same_as_qemu --output=json $win top.qcow2
    same_as_qemu $win top.qcow2
done

# compressed clusters: JSON without offset, human form fails as qemu-img
qemu-img create -q -f qcow2 c.qcow2 2M
qio -c "write -c -P 1 0 64k" -c "write -c -P 1 64k 64k" -c "write -P 2 128k 64k" c.qcow2
both_forms c.qcow2
grep -q "compressed" "$T/d.err" || fail "human form: no word on compressed clusters: $(cat "$T/d.err")"
qemu-img convert -c -O qcow2 base.qcow2 cbase.qcow2
same_as_qemu --output=json cbase.qcow2

# preallocation=metadata: allocated clusters over file holes read as zeros
qemu-img create -q -f qcow2 -o preallocation=metadata p.qcow2 2M
qio -c "write -P 1 0 64k" p.qcow2
both_forms p.qcow2

# small clusters, many of them, fragmented by interleaved writes
qemu-img create -q -f qcow2 -o cluster_size=4k f.qcow2 4M
for i in 0 1 2 3 4 5 6 7; do qio -c "write -P $i $((i * 4))k 4k" -c "write -P $i $((i * 4 + 2048))k 4k" f.qcow2; done
both_forms f.qcow2

# 100 GiB, two data runs: a handful of block-status calls
qemu-img create -q -f qcow2 big.qcow2 100G
qio -c "write -P 1 5G 64k" -c "write -P 2 99G 1M" big.qcow2
both_forms big.qcow2
s=$(date +%s%N)
"$DISKIMG" map --output=json big.qcow2 > /dev/null || fail "map big.qcow2"
ms=$(( ($(date +%s%N) - s) / 1000000 ))
[ $ms -lt 3000 ] || fail "mapping a 100 GiB sparse qcow2 took $ms ms"

# a backing file that is missing: an error naming it, exit 1
qemu-img create -q -f qcow2 -b gone.qcow2 -F qcow2 -u orphan.qcow2 1M
expect_error "gone.qcow2" "$DISKIMG" map orphan.qcow2
exit 0
