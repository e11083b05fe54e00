#!/bin/bash
# Sources whose size is not a whole number of the output's blocks, or not
# even of sectors, into vpc (dynamic, fixed, force_size), vdi and vhdx:
# the output has qemu-img's virtual size (vpc and vdi round the size up)
# and reads as the source followed by zeros.  These conversions used to
# stop with "internal error: write ... is not aligned" at the last block.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || exit 1
head -c 1000 /dev/urandom > a.raw               # under a sector
head -c 3000000 /dev/urandom > b.raw            # past a 2 MiB block, mid-sector
gen -s 3 -M 64K 3M c.raw && truncate -s 3146241 c.raw   # 3 MiB + 1 byte, holes
for src in a.raw b.raw c.raw; do
    for o in "vpc" "vpc -o subformat=fixed" "vpc -o force_size=on" "vdi" "vdi -o static=on" "vhdx"; do
        set -- $o; fmt=$1; shift
        rm -f d.img q.img
        "$DISKIMG" convert -f raw -O $fmt "$@" "$src" d.img 2> err || { cat err >&2; fail "$src -> $o: exit status"; }
        qemu-img convert -f raw -O $fmt "$@" "$src" q.img || fail "qemu-img $src -> $o"
        ds=$(qemu-img info -f $fmt --output=json d.img | jq '."virtual-size"')
        qs=$(qemu-img info -f $fmt --output=json q.img | jq '."virtual-size"')
        [ "$ds" = "$qs" ] || fail "$src -> $o: virtual size $ds, qemu-img's $qs"
        qemu-img compare -q -f raw -F $fmt "$src" d.img || fail "$src -> $o: content differs from the source"
        case $fmt in vdi) qemu-img check -q -f vdi d.img || fail "$src -> $o: qemu-img check" ;; esac
    done
done
exit 0
