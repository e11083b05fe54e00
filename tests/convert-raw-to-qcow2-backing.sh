#!/bin/bash
# diskimg convert -O qcow2 -B BASE: only what differs from BASE is stored;
# zero ranges over BASE's data become zero clusters (v3 zero flag, v2
# allocated zeros, extended-L2 zero subclusters).  The overlay checks clean
# and reads back as the source.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T"

gen -s 31 -a 90 -m 64K -M 512K 8M base.raw
cp base.raw src.raw
# change some ranges, zero some others (over data of the base)
gen -s 32 -a 100 -m 64K -M 256K 1M patch.raw
dd if=patch.raw of=src.raw bs=64K seek=10 conv=notrunc status=none
dd if=/dev/zero of=src.raw bs=64K seek=40 count=16 conv=notrunc status=none
dd if=/dev/zero of=src.raw bs=64K seek=100 count=3 conv=notrunc status=none

for opts in "" compat=0.10 extended_l2=on cluster_size=4K "extended_l2=on,preallocation=metadata"; do
    rm -f ov.qcow2
    ok "$DISKIMG" convert -t unsafe -O qcow2 ${opts:+-o "$opts"} -B base.raw -F raw src.raw ov.qcow2
    qemu-img check -q ov.qcow2 || fail "check: $opts"
    qcompare src.raw ov.qcow2
    info=$(qemu-img info --output=json ov.qcow2 | tr -d ' ')
    grep -q '"backing-filename":"base.raw"' <<<"$info" || fail "backing name ($opts)"
    grep -q '"backing-filename-format":"raw"' <<<"$info" || fail "backing format ($opts)"
    # most of the image is left to the backing file
    qemu-img map --output=json ov.qcow2 | grep -q '"depth": 1' || fail "nothing from the base ($opts)"
    if [ -z "$opts" ]; then
        # unchanged data is not stored again: far smaller than the source
        [ "$(stat -c %s ov.qcow2)" -lt $((3 * 1024 * 1024)) ] ||
            fail "overlay holds $(stat -c %s ov.qcow2) bytes"
    fi
done

# compressed overlay
ok "$DISKIMG" convert -t unsafe -c -O qcow2 -o compression_type=zstd -B base.raw -F raw src.raw ovc.qcow2
qemu-img check -q ovc.qcow2 || fail "check compressed overlay"
qcompare src.raw ovc.qcow2
exit 0
