#!/bin/bash
# resize of VHDX images (qemu-img 7.2 cannot): growing inside the BAT
# region and past it (the BAT moves to the end of the file), growing a
# fixed image by allocated blocks, shrinking with --shrink only (the file
# is cut, and what lay past the end reads as zeros when it grows again).
# The same for images qemu-img made.
# Every result passes qemu-img check and our check, keeps its content
# (qemu-img compare, vhdimount), and takes qemu's writes.  A resize failed
# at any one of its writes or syncs (DISKIMG_FAULT) leaves a valid image of
# the old or the new size with the content kept (every case in the ASan
# build, every third in the plain one: sweep_case).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
M=$((1 << 20))
vsize() { qemu-img info --output=json "$1" | sed -n 's/^ *"virtual-size": \([0-9]*\),*$/\1/p'; }

qemu-img create -q -f qcow2 "$T/src.qcow2" 40M
qemu-io -c "write -P 0x33 1M 3M" -c "write -P 0x44 20M 64k" -c "write -P 0x55 $((40 * M - 4096)) 4k" \
    "$T/src.qcow2" > /dev/null || fail qemu-io
qemu-img convert -O raw "$T/src.qcow2" "$T/src.raw"
ok "$DISKIMG" convert -O vhdx -o block_size=1M "$T/src.qcow2" "$T/dy.vhdx"

# grow: 200M fits the BAT's MiB, 1100G (140800 entries) does not
for to in 200M 1100G; do
    cp "$T/dy.vhdx" "$T/r.vhdx"
    ok "$DISKIMG" resize "$T/r.vhdx" $to > /dev/null
    [ "$(vsize "$T/r.vhdx")" = "$(numfmt --from=iec $to)" ] || fail "resize $to: size"
    qemu-img check "$T/r.vhdx" > /dev/null || fail "resize $to: check"
    ok "$DISKIMG" check "$T/r.vhdx" > /dev/null
    qemu-io -c "read -P 0x33 1M 3M" -c "read -P 0x55 $((40 * M - 4096)) 4k" -c "read -P 0 $((40 * M)) 1M" \
        -c "write -P 0x66 $((150 * M)) 64k" -c "read -P 0x66 $((150 * M)) 64k" "$T/r.vhdx" > "$T/io" ||
        fail "resize $to: qemu-io"
    grep -q "Pattern verification failed" "$T/io" && fail "resize $to: content"
    qemu-img check "$T/r.vhdx" > /dev/null || fail "resize $to: check after qemu's write"
    ok "$DISKIMG" compare "$T/r.vhdx" "$T/r.vhdx" > /dev/null
done
cp "$T/dy.vhdx" "$T/r.vhdx"
expect_error "--shrink" "$DISKIMG" resize "$T/r.vhdx" 30M
expect_error "multiple of the logical sector" "$DISKIMG" resize "$T/r.vhdx" 50000000
ok "$DISKIMG" resize --shrink "$T/r.vhdx" 30M > /dev/null
[ $(stat -c %s "$T/r.vhdx") -lt $(stat -c %s "$T/dy.vhdx") ] || fail "shrink: the file kept its blocks"
head -c $((30 * M)) "$T/src.raw" > "$T/s30.raw"
qemu-img compare "$T/s30.raw" "$T/r.vhdx" > /dev/null || fail "shrink: content"
# grown again: what was past 30M reads as zeros
ok "$DISKIMG" resize "$T/r.vhdx" 40M > /dev/null
truncate -s 40M "$T/s30.raw"
qemu-img compare "$T/s30.raw" "$T/r.vhdx" > /dev/null || fail "shrink and grow: content"
( yal_read "$T/r.vhdx" "$T/yal.raw" vhdx ) ; rc=$?
[ $rc = 0 ] && { cmp "$T/yal.raw" "$T/s30.raw" || fail "resize: vhdimount reads it differently"; }
[ $rc = 0 ] || [ $rc = 77 ] || fail "vhdimount"
# a fixed image grows by whole, allocated blocks
ok "$DISKIMG" convert -O vhdx -o subformat=fixed,block_size=1M "$T/src.qcow2" "$T/rf.vhdx"
ok "$DISKIMG" resize "$T/rf.vhdx" 100M > /dev/null
qemu-img check "$T/rf.vhdx" > /dev/null || fail "fixed resize: check"
[ $(stat -c %s "$T/rf.vhdx") -ge $((100 * M)) ] || fail "fixed resize: blocks not in the file"
cp "$T/src.raw" "$T/s100.raw"; truncate -s 100M "$T/s100.raw"
qemu-img compare "$T/s100.raw" "$T/rf.vhdx" > /dev/null || fail "fixed resize: content"
ok "$DISKIMG" measure -O vhdx -o subformat=fixed,block_size=1M --size 100M > "$T/m"
grep -qx "required size: $(stat -c %s "$T/rf.vhdx")" "$T/m" || fail "fixed resize: not the size of a new fixed image"

# images qemu-img made (its layout: 4 MiB past the metadata, regions not
# marked required, a fixed image's blocks after its preallocated ones)
for o in "" subformat=fixed; do
    qemu-img convert -O vhdx ${o:+-o $o} "$T/src.qcow2" "$T/q.vhdx"
    cp "$T/q.vhdx" "$T/q2.vhdx"
    ok "$DISKIMG" resize "$T/q.vhdx" 1100G > /dev/null
    qemu-img check "$T/q.vhdx" > /dev/null || fail "qemu's $o, grown: check"
    [ "$(vsize "$T/q.vhdx")" = $((1100 << 30)) ] || fail "qemu's $o, grown: size"
    ok "$DISKIMG" compare "$T/src.qcow2" "$T/q.vhdx" > /dev/null
    ok "$DISKIMG" resize --shrink "$T/q2.vhdx" 30M > /dev/null
    qemu-img check "$T/q2.vhdx" > /dev/null || fail "qemu's $o, shrunk: check"
    head -c $((30 * M)) "$T/src.raw" > "$T/s30.raw"
    qemu-img compare "$T/s30.raw" "$T/q2.vhdx" > /dev/null || fail "qemu's $o, shrunk: content"
done

# a resize failed at any write or sync: a valid image, old size or new,
# content kept
for spec in 200M 1100G -30M; do
    shrink=; to=$spec; [ "${spec#-}" != "$spec" ] && { shrink=--shrink; to=${spec#-}; }
    cp "$T/dy.vhdx" "$T/r.vhdx"
    rm -f "$T/stats"
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" resize $shrink "$T/r.vhdx" $to > /dev/null || fail "resize $spec"
    read -r _ _ _ W _ S _ < "$T/stats"
    for kind in write sync; do
        [ $kind = write ] && n_all=$W || n_all=$S
        for ((n = 1; n <= n_all; n++)); do
            sweep_case $n $n_all || continue
            cp "$T/dy.vhdx" "$T/r.vhdx"
            DISKIMG_FAULT=$kind:$n:EIO "$DISKIMG" resize $shrink "$T/r.vhdx" $to > /dev/null 2> "$T/err" &&
                fail "resize $spec: $kind $n/$n_all did not fail"
            grep -q "Input/output error" "$T/err" || { cat "$T/err"; fail "resize $spec: $kind $n: message"; }
            qemu-img check "$T/r.vhdx" > "$T/chk" 2>&1 || { cat "$T/chk"; fail "resize $spec: $kind $n: check"; }
            vs=$(vsize "$T/r.vhdx")
            [ "$vs" = $((40 * M)) ] || [ "$vs" = "$(numfmt --from=iec $to)" ] ||
                fail "resize $spec: $kind $n: size $vs"
            qemu-io -r -c "read -P 0x33 1M 3M" -c "read -P 0x44 20M 64k" -c "read -P 0 24M 1M" \
                "$T/r.vhdx" > "$T/io" || fail "resize $spec: $kind $n: qemu-io"
            grep -q "Pattern verification failed" "$T/io" && fail "resize $spec: $kind $n: content"
        done
    done
    echo "resize $spec: $W writes, $S syncs failed one by one"
done
echo ok
