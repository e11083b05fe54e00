#!/bin/bash
# diskimg measure IMG against qemu-img measure IMG: equal numbers (human and
# JSON, bitmaps included) for raw and qcow2 sources of every kind (holes,
# data/zero/unallocated/compressed clusters, subclusters, v2, a backing
# chain, persistent bitmaps, a snapshot with -l) and several targets.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

n=0
same() {
    local rc=0 qrc=0
    "$DISKIMG" measure "$@" > mine 2> mine.err || rc=$?
    qemu-img measure "$@" > ref 2> ref.err || qrc=$?
    grep -q "AddressSanitizer\|runtime error" mine.err && fail "sanitizer: measure $*"
    [ $rc = $qrc ] || { cat mine.err ref.err; fail "measure $*: exit $rc, qemu-img $qrc"; }
    cmp -s mine ref || { diff mine ref; fail "measure $*: output differs from qemu-img's"; }
    n=$((n + 1))
}
# every target for one source
targets() {
    same "$@"
    same --output=json "$@"
    same -O qcow2 "$@"
    same -O qcow2 --output=json "$@"
    same -O qcow2 -o cluster_size=4k "$@"
    same -O qcow2 -o cluster_size=2M,refcount_bits=1 "$@"
    same -O qcow2 -o extended_l2=on,cluster_size=32k "$@"
    same -O qcow2 -o compat=0.10 "$@"
    same -O qcow2 -o preallocation=full "$@"
    same -O qcow2 -o backing_file=whatever.qcow2 "$@"
}

# raw: holes and data at unaligned places, an odd size, empty, all zeros written
gen -s 5 -a 40 -m 3K -M 900K $((9 * 1024 * 1024)) holes.raw
targets holes.raw
gen -s 6 -u -m 1 -M 200K $((3 * 1024 * 1024 + 333)) odd.raw
targets odd.raw
: > empty.raw
targets empty.raw
head -c 1M /dev/zero > zeros.raw
targets zeros.raw

# qcow2: data, zero-flag, unallocated, compressed clusters
qemu-img create -q -f qcow2 -o cluster_size=16k mix.qcow2 5M
qemu-io -c 'write -P 1 0 100k' -c 'write -z 1M 64k' -c 'write -P 2 3M 1k' \
        -c 'write -P 3 4100k 17k' mix.qcow2 >/dev/null
targets mix.qcow2
qemu-img convert -c -O qcow2 mix.qcow2 comp.qcow2
targets comp.qcow2
# subclusters: partly allocated clusters
qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=64k xl.qcow2 3M
qemu-io -c 'write -P 4 2k 2k' -c 'write -P 5 1M 70k' -c 'write -z 2M 64k' xl.qcow2 >/dev/null
targets xl.qcow2
# preallocation=metadata: data clusters over holes of the file read as zeros
qemu-img create -q -f qcow2 -o preallocation=metadata pm.qcow2 4M
qemu-io -c 'write -P 4 1M 100k' pm.qcow2 >/dev/null
targets pm.qcow2
# v2 image (no bitmaps line), odd virtual size
qemu-img create -q -f qcow2 -o compat=0.10 v2.qcow2 1000000
qemu-io -c 'write -P 6 512k 4k' v2.qcow2 >/dev/null
targets v2.qcow2
# persistent bitmaps of several granularities and name lengths
cp mix.qcow2 bm.qcow2
qemu-img bitmap --add bm.qcow2 b0
qemu-img bitmap --add -g 512 bm.qcow2 a-much-longer-bitmap-name
qemu-img bitmap --add -g 2M bm.qcow2 x
targets bm.qcow2
# a backing chain: qcow2 over qcow2 over raw (the chain's content counts)
gen -s 7 -a 50 -m 8K -M 300K $((4 * 1024 * 1024)) base.raw
qemu-img create -q -f qcow2 -b base.raw -F raw mid.qcow2
qemu-io -c 'write -P 7 2M 200k' -c 'write -z 0 512k' mid.qcow2 >/dev/null
qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2 6M
qemu-io -c 'write -P 8 5M 4k' top.qcow2 >/dev/null
targets top.qcow2
# internal snapshots: the active layer, and a snapshot with -l
cp mix.qcow2 snap.qcow2
qemu-img snapshot -c one snap.qcow2
qemu-io -c 'write -P 9 2M 1M' -c 'write -z 0 64k' snap.qcow2 >/dev/null
targets snap.qcow2
same -O qcow2 -l one snap.qcow2
same -O qcow2 -l snapshot.name=one --output=json snap.qcow2
same -O raw -l one snap.qcow2
expect_error "" "$DISKIMG" measure -O qcow2 -l nothere snap.qcow2
# the source read as raw
same -O qcow2 -f raw mix.qcow2
expect_error "no such file" "$DISKIMG" measure -O qcow2 nothere.qcow2
expect_error "size of a stream is not known" sh -c 'cat "$1" | "$2" measure -O qcow2 -' sh \
    holes.raw "$DISKIMG"
echo "$n comparisons"
exit 0
