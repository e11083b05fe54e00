#!/bin/bash
# Several sources whose sizes are not whole sectors: each source after the
# first starts on a 512-byte boundary, zeros in between, as qemu-img lays
# them out (a 1000-byte source followed by another: the second starts at
# 1024; it used to start at 1000).  The virtual size is qemu-img's for
# qcow2 and vmdk output; raw output ends where the last source ends (as a
# single source's copy does), qemu-img's goes on to the sector's end.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || exit 1
head -c 1000 /dev/urandom > a.raw
head -c 777 /dev/urandom > b.raw
head -c 1500 /dev/urandom > c.raw
head -c 512 /dev/urandom > d.raw
# a hole (read from metadata) running into the padding, and a chunk crossed
truncate -s $((1024 * 1024 + 100)) e.raw
head -c 3000 /dev/urandom | dd of=e.raw bs=1 seek=$((1024 * 1024 - 2900)) conv=notrunc status=none
truncate -s 300 f.raw
printf '\x5a' | dd of=f.raw bs=1 seek=299 conv=notrunc status=none

check() {           # NAME SRC...
    local name=$1; shift
    rm -f q.raw d.raw.out q.qcow2 d.qcow2 q.vmdk d.vmdk
    qemu-img convert -f raw -O raw "$@" q.raw || fail "$name: qemu-img raw"
    ok "$DISKIMG" convert -f raw -O raw "$@" d.raw.out
    local last=${!#} qs ds pad
    qs=$(stat -c %s q.raw)
    ds=$(stat -c %s d.raw.out)
    pad=$(( (512 - $(stat -c %s "$last") % 512) % 512 ))
    [ "$ds" -eq $((qs - pad)) ] || fail "$name: raw output of $ds bytes, qemu-img's $qs"
    cmp -n "$ds" q.raw d.raw.out || fail "$name: raw output differs from qemu-img's"
    cmp -i "$ds:0" -n "$pad" q.raw /dev/zero || fail "$name: qemu-img's padding is not zeros?"
    for fmt in qcow2 vmdk; do
        qemu-img convert -f raw -O $fmt "$@" q.$fmt || fail "$name: qemu-img $fmt"
        ok "$DISKIMG" convert -f raw -O $fmt "$@" d.$fmt
        [ "$(qemu-img info --output=json d.$fmt | grep '"virtual-size"')" = \
          "$(qemu-img info --output=json q.$fmt | grep '"virtual-size"')" ] ||
            fail "$name: $fmt virtual size differs from qemu-img's"
        qemu-img compare -q q.$fmt d.$fmt || fail "$name: $fmt differs from qemu-img's"
        qemu-img convert -O raw d.$fmt back.raw || fail "$name: $fmt back to raw"
        cmp q.raw back.raw || fail "$name: $fmt bytes differ from qemu-img's"
    done
}
check "two" a.raw b.raw
check "three" a.raw b.raw c.raw
check "whole sector first" d.raw a.raw c.raw
check "hole into the padding" e.raw f.raw a.raw
exit 0
