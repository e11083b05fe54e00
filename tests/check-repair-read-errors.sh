#!/bin/bash
# check -r on a damaged qcow2 image with EIO injected on the Nth read, for
# every N a repair makes.  A read that fails while the references are
# counted (an L2 table, the L1 table, a refcount block) leaves a count that
# misses references: used clusters look free, and a repair built on it
# (leaks lowered to 0, new refcount blocks placed on "free" clusters) once
# wrote refcounts over guest data and reported success.  Now such a repair
# is refused before anything is written: exit 1, a message that says so,
# the image byte for byte as it was.  Whatever the Nth read, the guest data
# is unchanged and a second repair without faults succeeds.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 plain.qcow2 4M
qemu-io -c 'write -P 0x71 0 200k' -c 'write -P 0x72 3M 64k' plain.qcow2 > /dev/null
REFT=$(peek64 plain.qcow2 48); RB=$(peek64 plain.qcow2 "$REFT")
NCL=$(( $(stat -c %s plain.qcow2) / 65536 ))
# needs a rebuild (the L1 table's refcount is 0) and has a leak past the data
cp plain.qcow2 rebuild.qcow2
poke rebuild.qcow2 $((RB + 2 * 3)) 0000
truncate -s $(( (NCL + 1) * 65536 )) rebuild.qcow2
poke rebuild.qcow2 $((RB + 2 * NCL)) 0001
# leaks only
cp plain.qcow2 leak.qcow2
truncate -s $(( (NCL + 1) * 65536 )) leak.qcow2
poke leak.qcow2 $((RB + 2 * NCL)) 0001

# sweep IMG MODE: every read of one repair fails in turn
sweep() {
    local img=$1 mode=$2 reads n rc refused=0
    rm -f stats
    cp "$img" count.qcow2
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" check count.qcow2 > /dev/null 2>&1
    read -r _ reads _ < stats || fail "no fault statistics"
    [ "$reads" -gt 3 ] || fail "$img: only $reads reads in a check?"
    rm -f stats
    cp "$img" count.qcow2
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" check -r "$mode" count.qcow2 > /dev/null 2>&1
    read -r _ n _ < stats || fail "no fault statistics"
    for i in $(seq 1 "$n"); do
        cp "$img" f.qcow2
        rc=0
        DISKIMG_FAULT=read:$i:EIO "$DISKIMG" check -r "$mode" f.qcow2 > out 2> err || rc=$?
        grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "$img read $i: sanitizer"; }
        # (3: a failed read after the rebuild left the old structure leaked)
        case $rc in 0|1|3) ;; *) cat err; fail "$img -r $mode, read $i fails: exit $rc" ;; esac
        if [ "$i" -le "$reads" ]; then
            # the count (or the open) failed: nothing may have been written
            [ $rc = 1 ] || { cat err; fail "$img -r $mode, read $i of the count fails: exit 0"; }
            cmp -s "$img" f.qcow2 || fail "$img -r $mode, read $i of the count fails: image changed"
            if grep -q "not repaired: the check could not count" err; then refused=1; fi
        fi
        qemu-img compare -q plain.qcow2 f.qcow2 || fail "$img -r $mode, read $i fails: guest data changed"
        "$DISKIMG" check -r all f.qcow2 > /dev/null 2> err || { cat err; fail "$img read $i: second repair"; }
        qemu-img check -q f.qcow2 || fail "$img -r $mode, read $i fails: not repairable"
        qemu-img compare -q plain.qcow2 f.qcow2 || fail "$img -r $mode, read $i: guest data changed"
    done
    [ $refused = 1 ] || fail "$img -r $mode: no read failure was refused as an incomplete count"
}
sweep rebuild.qcow2 all
sweep leak.qcow2 leaks
sweep leak.qcow2 all
exit 0
