#!/bin/bash
# resize --shrink of a qcow2 image whose refcounts are wrong: a data cluster
# the new size keeps has refcount 0 and lies at the end of the file.  A
# shrink cuts the file after the last cluster in use by the refcounts, so
# it once cut that cluster off (exit 0; reading it afterwards failed).  The
# image is now checked first and refused as `convert -n` refuses a corrupt
# target: exit 1, a message naming the corruptions and the repair, the file
# unchanged.  Growing that needs a new L1 table (new clusters, refcount
# blocks changed) is refused too; once check -r all has repaired the image
# the same shrink keeps the data.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

# the data of guest offset 3M is written first, so that of offset 0 is the
# last cluster of the file
qemu-img create -q -f qcow2 good.qcow2 4M
qemu-io -c 'write -P 0x72 3M 64k' -c 'write -P 0x71 0 64k' good.qcow2 > /dev/null
L1=$(peek64 good.qcow2 40); L2=$(( $(peek64 good.qcow2 "$L1") & 0x00fffffffffffe00 ))
LAST=$(( $(peek64 good.qcow2 "$L2") & 0x00fffffffffffe00 ))
[ $((LAST + 65536)) = "$(stat -c %s good.qcow2)" ] || fail "guest cluster 0 is not the file's last"
REFT=$(peek64 good.qcow2 48); RB=$(peek64 good.qcow2 "$REFT")
cp good.qcow2 bad.qcow2
poke bad.qcow2 $((RB + 2 * (LAST / 65536))) 0000
qemu-img check bad.qcow2 > /dev/null 2>&1 && fail "the damaged image checks clean"

cp bad.qcow2 s.qcow2
expect_error "s\.qcow2: the image has [0-9]+ corruptions and 0 check errors; shrinking it could destroy data: repair it first with 'diskimg check -r all'" \
    "$DISKIMG" resize --shrink s.qcow2 1M
cmp -s bad.qcow2 s.qcow2 || fail "the refused shrink changed the image"
qemu-io -c 'read -q -P 0x71 0 64k' s.qcow2 > qio 2>&1 && ! grep -q . qio || fail "data lost"

# growing into a new L1 table: refused the same way; the header alone: done
expect_error "corruptions.*growing its L1 table could destroy data" \
    "$DISKIMG" resize s.qcow2 1T
cmp -s bad.qcow2 s.qcow2 || fail "the refused grow changed the image"
"$DISKIMG" resize -q s.qcow2 8M || fail "a grow of the header alone was refused"

# repaired, the shrink keeps what lies below the new size
cp bad.qcow2 r.qcow2
"$DISKIMG" check -q -r all r.qcow2 || fail "check -r all"
"$DISKIMG" resize -q --shrink r.qcow2 1M || fail "shrink after the repair"
qemu-img check -q r.qcow2 || fail "the repaired, shrunk image does not check clean"
qemu-io -c 'read -q -P 0x71 0 64k' -c 'read -q -P 0 64k 960k' r.qcow2 > qio 2>&1 &&
    ! grep -q . qio || { cat qio; fail "content after the repair and shrink"; }
exit 0
