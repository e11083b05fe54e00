#!/bin/bash
# diskimg commit that fails or dies midway: each write and each sync it
# makes failed in turn (DISKIMG_FAULT), and kill -9 at several moments.
# Afterwards the base checks clean with qemu-img (leaked clusters at
# worst) and every 512-byte sector of it reads either its old content or
# the top's (a partially committed copy, never garbage); the top reads as
# before (it is emptied only once the base is synced, in one switch) and
# checks clean.  qcow2 and raw bases.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
cd "$T" || fail "cd"

okcheck() {
    qemu-img check -q "$1" >/dev/null 2>&1; local rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || { qemu-img check "$1"; fail "$2: $1 not clean"; }
}
# every sector of the base is the old one's or the top's
sectors() {
    qemu-img convert -O raw "$1" now.raw || fail "$2: base unreadable"
    python3 - now.raw old.raw view.raw "$2" <<'EOF' || fail "$2: base holds garbage"
import sys
now, old, new = (open(p, 'rb').read() for p in sys.argv[1:4])
for i in range(0, len(now), 512):
    s = now[i:i + 512]
    o = old[i:i + 512] if i < len(old) else bytes(len(s))
    if s != o and s != new[i:i + 512]:
        sys.exit("%s: sector at %d is neither old nor new" % (sys.argv[4], i))
EOF
}
verify() {
    [ $fmt = raw ] || okcheck "s/$base" "$1"
    okcheck s/top.qcow2 "$1"
    sectors "s/$base" "$1"
    qcompare s/top.qcow2 view.raw
}

for base in base.qcow2 base.raw; do
    rm -rf o s; mkdir o
    fmt=${base#base.}
    opts=(); [ $fmt = qcow2 ] && opts=(-o cluster_size=4k)
    qemu-img create -q -f $fmt "${opts[@]}" o/$base 3M
    qemu-io -f $fmt -c 'write -P 0x11 0 1M' -c 'write -P 0x12 2M 512k' o/$base >/dev/null
    qemu-img create -q -f qcow2 -o cluster_size=16k -b $base -F $fmt o/top.qcow2 4M
    qemu-io -c 'write -c -P 0x21 0 64k' -c 'write -P 0x22 256k 512k' -c 'write -z 2M 128k' \
        -c 'write -P 0x23 2560k 16k' -c 'write -P 0x24 3M 512k' o/top.qcow2 >/dev/null
    qemu-img convert -O raw -f $fmt o/$base old.raw
    qemu-img convert -O raw o/top.qcow2 view.raw
    cp -a o s
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" commit -q s/top.qcow2 || fail "$base: counting run"
    verify "$base: whole run"
    read -r _ _ _ W _ S _ < "$T/stats"
    [ "$W" -gt 3 ] && [ "$S" -ge 2 ] || fail "$base: only $W writes and $S syncs"
    step=$(( W > 36 ? W / 12 : 1 ))
    for ((n = 1; n <= W; n += step)); do
        sweep_case $n $W || continue
        rm -rf s; cp -a o s
        expect_error "." env DISKIMG_FAULT=write:$n:EIO "$DISKIMG" commit -q s/top.qcow2
        verify "$base: write $n failed"
    done
    for ((n = 1; n <= S; n++)); do
        rm -rf s; cp -a o s
        expect_error "." env DISKIMG_FAULT=sync:$n:EIO "$DISKIMG" commit -q s/top.qcow2
        verify "$base: sync $n failed"
    done
    for wait in 0.05 0.2 0.4; do
        rm -rf s; cp -a o s
        DISKIMG_FAULT=write:1+:delay40 "$DISKIMG" commit -q s/top.qcow2 2>/dev/null &
        pid=$!; sleep $wait; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
        verify "$base: killed after $wait s"
        # (the first kill comes before the end: the top still holds its data)
        [ $wait != 0.05 ] || qemu-img map --output=json s/top.qcow2 | grep -q '"depth": 0' ||
            fail "$base: killed after $wait s, yet the commit had ended"
    done
done
echo "commit-crash: ok"
