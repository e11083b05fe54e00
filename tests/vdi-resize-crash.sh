#!/bin/bash
# diskimg resize of a VDI stopped at any point: every write, then every
# sync, failed in turn (exit 1; the process writes nothing after it, as
# if killed there), and a torn (short) write.  Each time the image must
# open, read its old content (qemu-img compare over the size it keeps),
# have either the old size or the new one, and pass qemu-img check --
# growing past the map's room a static image's blocks are copied to
# slots past its old block count before the switch, which qemu-img check
# reports (index too large, and so a count mismatch: the messages allowed
# there).  Cases: growing within the map's room, growing past it (blocks
# move; dynamic and static), and shrinking with blocks that must move down
# to keep the indexes dense.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

# make NAME OPTS: a 24 MiB image, blocks allocated out of order
make_img() {
    qemu-img create -q -f vdi -o "$2" "$1" 24M
    qemu-io -f vdi -c 'write -P 0x21 20M 1M' -c 'write -P 0x22 0 1M' -c 'write -P 0x23 3M 1M' \
        -c 'write -P 0x24 23M 512k' -c 'write -P 0x25 7M 1M' "$1" >/dev/null || fail "qemu-io $1"
}

# verify TAG OLD_SIZE NEW_SIZE ALLOW: after an interrupted resize
verify() {
    local tag=$1 old=$2 new=$3 allow=$4 size keep
    size=$(qemu-img info --output=json img.vdi | sed -n 's/^ *"virtual-size": \([0-9]*\),*$/\1/p')
    [ "$size" = "$old" ] || [ "$size" = "$new" ] || fail "$tag: size $size"
    keep=$(( old < new ? old : new ))
    qemu-img convert -q -f vdi -O raw img.vdi got.raw || fail "$tag: qemu-img cannot read it"
    cmp -n "$keep" got.raw base.raw || fail "$tag: content changed"
    "$DISKIMG" convert -q -O raw img.vdi got2.raw || fail "$tag: diskimg cannot read it"
    cmp -n "$keep" got2.raw base.raw || fail "$tag: diskimg reads other content"
    if ! qemu-img check img.vdi > check.out 2>&1; then
        [ "$allow" = 1 ] && ! grep ERROR check.out | grep -v 'too large' | grep -qv 'allocated blocks mismatch' ||
            { cat check.out; fail "$tag: qemu-img check"; }
    fi
    return 0
}

total=0
for spec in "static=off 40M 0" "static=off 300M 0" "static=on 300M 1" "static=off 5M 0"; do
    set -- $spec
    make_img base.vdi "$1"
    qemu-img convert -q -f vdi -O raw base.vdi base.raw
    old=$((24 * 1024 * 1024)); new=$(numfmt --from=iec "$2")
    shr=(); [ "$new" -lt "$old" ] && shr=(--shrink)
    cp base.vdi img.vdi
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" resize "${shr[@]}" img.vdi "$2" || fail "$spec"
    read -r _ R _ W _ S _ < "$T/stats"
    verify "$spec (clean run)" "$old" "$new" 0
    [ "$(qemu-img info --output=json img.vdi | grep -c "\"virtual-size\": $new")" = 1 ] ||
        fail "$spec: not resized"
    ok "$DISKIMG" check img.vdi > /dev/null
    for kind in write:$W sync:$S; do
        op=${kind%:*}; last=${kind#*:}
        for ((n = 1; n <= last; n++)); do
            cp base.vdi img.vdi
            expect_error "." env DISKIMG_FAULT=$op:$n:EIO "$DISKIMG" resize "${shr[@]}" img.vdi "$2"
            verify "$spec, $op $n of $last failed" "$old" "$new" "$3"
            total=$((total + 1))
        done
    done
    # a torn last write (the header)
    cp base.vdi img.vdi
    env DISKIMG_FAULT=write:$W:short,write:$((W + 1))+:EIO "$DISKIMG" resize "${shr[@]}" img.vdi "$2" \
        >/dev/null 2>&1
    verify "$spec, torn header" "$old" "$new" "$3"
done
echo "ok ($total interrupted resizes)"
