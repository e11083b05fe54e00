#!/bin/bash
# diskimg amend stopped at any point: every write, then every sync, failed
# in turn (exit 1), and kill -9 at several moments of a slowed run, for
# each way amend changes an image: a new refcount width (narrower and
# wider), a downgrade that expands zero clusters over a backing file and
# drops persistent bitmaps, an upgrade that completes old snapshot
# entries, a header-only change.  Each time qemu-img check finds the image
# clean (not even leaks: the new structures go past the end of the file
# with no refcount until the header switches to them), the guest view and
# the snapshot read the same, and the image is either the old one or the
# new one (qemu-img info's compat and refcount bits).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 -o cluster_size=4k base.qcow2 4M
qemu-io -c 'write -P 7 0 4M' base.qcow2 >/dev/null
qemu-img create -q -f qcow2 -o cluster_size=4k -b base.qcow2 -F qcow2 top.qcow2
qemu-io -c 'write -P 1 0 1M' -c 'write -z 64k 128k' -c 'write -c -P 2 2M 256k' top.qcow2 >/dev/null
qemu-img snapshot -c s1 top.qcow2
qemu-io -c 'write -P 3 512k 1M' -c 'write -z 3M 64k' -c 'write -z 0 8k' top.qcow2 >/dev/null
qemu-img bitmap --add top.qcow2 b0
qemu-img create -q -f qcow2 -o compat=0.10,cluster_size=4k v2.qcow2 4M
qemu-io -c 'write -P 5 0 2M' v2.qcow2 >/dev/null
qemu-img snapshot -c s1 v2.qcow2
qemu-io -c 'write -P 6 1M 2M' v2.qcow2 >/dev/null
# the snapshot entry without v3's extra data (an old qemu's)
python3 - v2.qcow2 <<'EOF' || fail "v2.qcow2"
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
so = struct.unpack('>Q', b[64:72])[0]
idl, nl = struct.unpack('>HH', b[so + 12:so + 16]); ex = struct.unpack('>I', b[so + 36:so + 40])[0]
e = bytearray(b[so:so + 40]); struct.pack_into('>I', e, 36, 0)
e += b[so + 40 + ex:so + 40 + ex + idl + nl]
n = 40 + ex + idl + nl
b[so:so + n] = e + b'\0' * (n - len(e))
open(p, 'wb').write(b)
EOF
for i in top v2; do
    qemu-img convert -O raw $i.qcow2 $i.raw
    qemu-img convert -O raw -l snapshot.name=s1 $i.qcow2 $i-s1.raw
done

state() {
    qemu-img info --output=json "$1" | grep -o '"compat": "[0-9.]*"\|"refcount-bits": [0-9]*\|"lazy-refcounts": [a-z]*' | tr '\n' ' '
}

# verify TAG IMG: the image after an interrupted amend of a copy of IMG
verify() {
    local tag=$1 img=$2 s
    qemu-img check -q t.qcow2 >/dev/null 2>&1 || { qemu-img check t.qcow2; fail "$tag: not clean"; }
    qemu-img compare -q "${img%.qcow2}.raw" t.qcow2 || fail "$tag: guest view changed"
    qemu-img convert -O raw -l snapshot.name=s1 t.qcow2 got.raw && cmp -s got.raw "${img%.qcow2}-s1.raw" ||
        fail "$tag: snapshot s1 changed"
    s=$(state t.qcow2)
    [ "$s" = "$OLD" ] || [ "$s" = "$NEW" ] || fail "$tag: neither the old nor the new image ($s)"
}

for c in "refcount_bits=64 top.qcow2" "refcount_bits=8 top.qcow2" "compat=0.10 top.qcow2" \
         "compat=1.1,refcount_bits=8 v2.qcow2" "lazy_refcounts=on top.qcow2"; do
    set -- $c
    o=$1 img=$2
    OLD=$(state $img)
    cp $img t.qcow2
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" amend -o "$o" t.qcow2 || fail "$o"
    NEW=$(state t.qcow2)
    [ "$NEW" != "$OLD" ] || fail "$o: nothing changed"
    verify "$o (clean run)" $img
    read -r _ R _ W _ S _ < "$T/stats"
    for kind in write:$W sync:$S; do
        op=${kind%:*}; last=${kind#*:}
        for ((n = 1; n <= last; n++)); do
            sweep_case $n $last || continue
            cp $img t.qcow2
            expect_error "." env DISKIMG_FAULT=$op:$n:EIO "$DISKIMG" amend -o "$o" t.qcow2
            verify "$o, $op $n of $last failed" $img
        done
    done
    # kill -9 while the writes are slowed
    for wait in 0.05 0.3; do
        cp $img t.qcow2
        DISKIMG_FAULT=write:1+:delay40 "$DISKIMG" amend -o "$o" t.qcow2 2>/dev/null &
        pid=$!
        sleep $wait
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        verify "$o, killed after ${wait}s" $img
    done
done
echo "amend-crash: ok"
