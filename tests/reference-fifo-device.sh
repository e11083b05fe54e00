#!/bin/bash
# A reference may name a regular file only.  A FIFO in the image's folder
# (an extent, a backing file) would block the open until some writer came,
# and a character device such as /dev/zero (reached with --allow-external)
# would be read as an endless or changing file: both are refused at once,
# with a message naming what they are.  (Block devices stay allowed: qcow2
# volumes on LVM name their backing volume.)
. "$(dirname "$0")/lib.sh"
need qemu-img
need timeout
cd "$T" || fail "cd"

flat() { printf '# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\ncreateType="monolithicFlat"\n\nRW 2048 FLAT "%s" 0\n' "$1"; }
# quick RE ARGS...: refused with RE within 20 seconds (a hang is a failure)
quick() {
    local re=$1; shift
    rm -f o.raw
    local rc=0
    timeout 20 "$DISKIMG" convert -O raw "$@" o.raw </dev/null 2>err || rc=$?
    [ $rc -ne 124 ] || fail "hangs: $*"
    [ $rc -eq 1 ] || { cat err; fail "exit $rc, not 1: $*"; }
    grep -Eq -- "$re" err || { cat err; fail "message: $*"; }
    [ ! -e o.raw ] || fail "an output was left: $*"
}

mkfifo pipe.raw
flat pipe.raw > fifo.vmdk
quick "pipe.raw: is not a regular file \(a FIFO\)" fifo.vmdk
qemu-img create -q -u -f qcow2 -b pipe.raw -F raw fifo.qcow2 1M || fail "qemu-img"
quick "pipe.raw: is not a regular file \(a FIFO\)" fifo.qcow2
qemu-img create -q -f qcow2 -o data_file=data.raw fifodata.qcow2 1M || fail "qemu-img"
rm data.raw && mkfifo data.raw
quick "data.raw: is not a regular file \(a FIFO\)" fifodata.qcow2

flat /dev/zero > zero.vmdk
quick "outside the image's folder" zero.vmdk
quick "/dev/zero: is not a regular file \(a character device\)" --allow-external zero.vmdk
ln -s /dev/zero zero-link.raw
flat zero-link.raw > zlink.vmdk
quick "leads outside the image's folder" zlink.vmdk
quick "is not a regular file \(a character device\)" --allow-external zlink.vmdk
qemu-img create -q -u -f qcow2 -b /dev/zero -F raw zero.qcow2 1M || fail "qemu-img"
quick "/dev/zero: is not a regular file \(a character device\)" --allow-external zero.qcow2
exit 0
