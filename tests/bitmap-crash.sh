#!/bin/bash
# diskimg bitmap stopped at any point: every write, then every sync,
# failed in turn (exit 1), and kill -9 at several moments of a slowed run.
# Each time qemu-img check finds the image clean (not even leaks: the new
# tables, directory and refcounts go past the end of the file with no
# refcount until the first cluster switches to them), and the bitmaps are
# either the old ones or the new ones (qemu-img info's list and each
# bitmap's dirty ranges, or the bytes of the file).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need qemu-nbd
need perl
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 -o cluster_size=4k base.qcow2 8M
qemu-io -c 'write -P 1 0 2M' base.qcow2 >/dev/null
qemu-img bitmap --add base.qcow2 a
qemu-io -c 'write 3M 5k' base.qcow2 >/dev/null
qemu-img bitmap --add -g 512 base.qcow2 b
qemu-io -c 'write 1M 300k' -c 'write 7M 1k' base.qcow2 >/dev/null
list() {
    qemu-img info --output=json "$1" | perl -0777 -ne \
        'print /"bitmaps": \[(.*?)\n {12}\]/s ? $1 =~ s/\s+//gr : "none", "\n"'
}
# state IMG: the bitmap list and every bitmap's dirty ranges (read by qemu,
# as in bitmap.sh)
state() {
    local n sock
    list "$1"
    for n in $(list "$1" | grep -o '"name":"[^"]*"' | cut -d'"' -f4); do
        sock=$(mktemp -u "$T/nbd.XXXXXXXX")
        qemu-nbd -r -f qcow2 -B "$n" -k "$sock" --fork "$1" || fail "qemu-nbd $1 $n"
        qemu-img map --output=json --image-opts \
            "driver=nbd,server.type=unix,server.path=$sock,x-dirty-bitmap=qemu:dirty-bitmap:$n" |
            grep '"data": false' || true
    done
}
old=$(state base.qcow2)

for args in "--add -g 64k --merge b c" "--remove a" "--clear b" "--merge a b"; do
    set -- $args
    name=${!#}; ops=("${@:1:$#-1}")
    cp base.qcow2 want.qcow2
    "$DISKIMG" bitmap "${ops[@]}" want.qcow2 "$name" || fail "$args"
    new=$(state want.qcow2)
    [ "$new" != "$old" ] || fail "$args: nothing changed"
    verify() {
        qemu-img check -q img.qcow2 >/dev/null 2>&1 || { qemu-img check img.qcow2; fail "$1: not clean"; }
        # the old file with more bytes past its end, or the new file as a
        # whole run leaves it (the layout is deterministic): no need to ask
        # qemu for the bitmaps again
        cmp -s -n "$(stat -c %s base.qcow2)" img.qcow2 base.qcow2 && return 0
        cmp -s img.qcow2 want.qcow2 && return 0
        local got; got=$(state img.qcow2)
        [ "$got" = "$old" ] || [ "$got" = "$new" ] || fail "$1: bitmaps $got"
        qcompare img.qcow2 base.qcow2
    }
    cp base.qcow2 img.qcow2
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" bitmap "${ops[@]}" img.qcow2 "$name" || fail "$args"
    read -r _ R _ W _ S _ < "$T/stats"
    echo "$args: $W writes, $S syncs"
    cmp -s img.qcow2 want.qcow2 || fail "$args: two runs wrote different files"
    for kind in write:$W sync:$S; do
        op=${kind%:*}; last=${kind#*:}
        for ((n = 1; n <= last; n++)); do
            cp base.qcow2 img.qcow2
            expect_error "." env DISKIMG_FAULT=$op:$n:EIO "$DISKIMG" bitmap "${ops[@]}" img.qcow2 "$name"
            verify "$args, $op $n of $last failed"
        done
    done
    for wait in 0.05 0.2; do
        cp base.qcow2 img.qcow2
        DISKIMG_FAULT=write:1+:delay60 "$DISKIMG" bitmap "${ops[@]}" img.qcow2 "$name" 2>/dev/null &
        pid=$!
        sleep $wait
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        verify "$args, killed after ${wait}s"
    done
done
echo "bitmap-crash: ok"
