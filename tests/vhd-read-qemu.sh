#!/bin/bash
# VHD images qemu-img writes (dynamic and fixed, force_size on and off,
# sizes that round to CHS geometry and sizes that do not), with data qemu-io
# wrote, read identically: convert -O raw equals qemu-img's conversion,
# info's virtual size is qemu-img's, map --output=json and compare agree
# with qemu-img.  A fixed VHD is probed by its footer (qemu-img calls it
# raw), and named with -f vhd (the alias) too.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io

same_as_qemu() {   # same_as_qemu CMD ARGS...
    local qrc=0 drc=0 cmd=$1; shift
    qemu-img $cmd "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" $cmd "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "$cmd $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "$cmd $*: output differs from qemu-img"; }
}
vsize() { sed -n 's/^ *"virtual-size": \([0-9]*\),*$/\1/p' | head -n 1; }

n=0
for sub in dynamic fixed; do
    for fs in off on; do
        for size in 1000 1M 10M 33M 100M; do
            n=$((n + 1))
            img=$T/$n.vhd
            qemu-img create -q -f vpc -o subformat=$sub,force_size=$fs "$img" $size || fail "create"
            qemu-io -f vpc -c "write -P 0x5a 0 4k" -c "write -P 0x11 512k 1536k" \
                -c "write -z 600k 4k" "$img" > /dev/null 2>&1 || true
            qemu-img convert -f vpc -O raw "$img" "$T/q.raw"
            ok "$DISKIMG" convert -O raw "$img" "$T/d.raw"
            cmp "$T/q.raw" "$T/d.raw" || fail "$sub force_size=$fs $size: content differs"
            q=$(qemu-img info -f vpc --output=json "$img" | vsize)
            d=$("$DISKIMG" info --output=json "$img" | vsize)
            [ "$q" = "$d" ] || fail "$sub force_size=$fs $size: virtual size $d, qemu-img $q"
            "$DISKIMG" info --output=json "$img" | grep -q '"format": "vpc"' ||
                fail "$sub $size: not probed as vpc"
            if [ $sub = dynamic ]; then
                same_as_qemu map --output=json "$img"
                same_as_qemu map "$img"
                "$DISKIMG" info --output=json "$img" | grep -q '"cluster-size": 2097152' ||
                    fail "no cluster-size"
            else
                same_as_qemu map -f vpc --output=json "$img"
            fi
            same_as_qemu compare -f vpc -F raw "$img" "$T/q.raw"
        done
    done
done
# -f vhd is the alias of vpc
ok "$DISKIMG" convert -f vhd -O raw "$T/1.vhd" "$T/alias.raw"
qemu-img convert -f vpc -O raw "$T/1.vhd" "$T/q1.raw"
cmp "$T/alias.raw" "$T/q1.raw" || fail "-f vhd"

# a large, nearly empty dynamic disk: only the allocated blocks are read
qemu-img create -q -f vpc "$T/big.vhd" 200G
qemu-io -f vpc -c "write -P 7 100G 1M" "$T/big.vhd" > /dev/null
start=$(date +%s%N)
ok "$DISKIMG" convert -O qcow2 "$T/big.vhd" "$T/big.qcow2"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ $ms -lt 20000 ] || fail "200 GiB sparse VHD took $ms ms"
qcompare "$T/big.vhd" "$T/big.qcow2"
echo ok
