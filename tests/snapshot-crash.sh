#!/bin/bash
# diskimg snapshot -c, -d and -a stopped at any point: every write, then
# every sync, failed in turn (exit 1), and kill -9 at several moments of a
# slowed run.  Each time qemu-img check finds the image clean (not even
# leaks: the new structures go past the end of the file with no refcount
# until the header switches to them), and the image is either the old one
# or the new one (snapshot list and active content).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 -o cluster_size=4k base.qcow2 8M
qemu-io -c 'write -P 1 0 2M' -c 'write -P 2 6M 300k' base.qcow2 >/dev/null
qemu-img snapshot -c s1 base.qcow2
qemu-io -c 'write -P 3 1M 2M' base.qcow2 >/dev/null
qemu-img convert -O raw base.qcow2 active.raw
qemu-img convert -O raw -l snapshot.name=s1 base.qcow2 s1.raw
nsnap() { "$DISKIMG" snapshot -l "$1" | grep -c '^[0-9]'; }

# verify TAG ARGS: the image after an interrupted `snapshot ARGS`
verify() {
    local tag=$1 n; shift
    qemu-img check -q img.qcow2 >/dev/null 2>&1 || { qemu-img check img.qcow2; fail "$tag: not clean"; }
    n=$(nsnap img.qcow2)
    case "$1" in
    -c) [ "$n" = 1 ] || [ "$n" = 2 ] || fail "$tag: $n snapshots"
        qcompare img.qcow2 active.raw ;;
    -d) [ "$n" = 1 ] || [ "$n" = 0 ] || fail "$tag: $n snapshots"
        qcompare img.qcow2 active.raw ;;
    -a) [ "$n" = 1 ] || fail "$tag: $n snapshots"
        qemu-img compare -q img.qcow2 active.raw || qemu-img compare -q img.qcow2 s1.raw ||
            fail "$tag: neither the old content nor the snapshot's" ;;
    esac
    [ "$n" = 0 ] || { qemu-img convert -O raw -l snapshot.name=s1 img.qcow2 got.raw &&
                      cmp -s got.raw s1.raw; } || fail "$tag: s1 damaged"
    return 0
}

for args in "-c new" "-d s1" "-a s1"; do
    cp base.qcow2 img.qcow2
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" snapshot $args img.qcow2 || fail "$args"
    read -r _ R _ W _ S _ < "$T/stats"
    verify "$args (clean run)" $args
    for kind in write:$W sync:$S; do
        op=${kind%:*}; last=${kind#*:}
        for ((n = 1; n <= last; n++)); do
            cp base.qcow2 img.qcow2
            expect_error "." env DISKIMG_FAULT=$op:$n:EIO "$DISKIMG" snapshot $args img.qcow2
            verify "$args, $op $n of $last failed" $args
        done
    done
    # kill -9 while the writes are slowed
    for wait in 0.05 0.2 0.4 0.8; do
        cp base.qcow2 img.qcow2
        DISKIMG_FAULT=write:1+:delay60 "$DISKIMG" snapshot $args img.qcow2 2>/dev/null &
        pid=$!
        sleep $wait
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        verify "$args, killed after ${wait}s" $args
    done
done
echo "snapshot-crash: ok"
