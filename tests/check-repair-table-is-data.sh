#!/bin/bash
# check -r all on a qcow2 image whose L2 entry names the L2 table itself as
# a guest data cluster (a hostile image; the guest reads the table's bytes
# there).  The repair raises the table's refcount to 2 and, as qemu-img
# does, would then clear the copied flags in that table -- changing the
# bytes the guest reads.  A repair writes no entry into a table that is
# also guest data: those flags are reported and left ("ERROR ... "), exit
# 2, and every guest byte reads as before.  Found by fuzz_qcow2_repair
# (with the L1 table named as an L2 table and a data cluster).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 plain.qcow2 4M
qemu-io -c 'write -P 0x71 0 192k' plain.qcow2 > /dev/null
L1=$(peek64 plain.qcow2 40); L2=$(( $(peek64 plain.qcow2 "$L1") & 0x00fffffffffffe00 ))
cp plain.qcow2 bad.qcow2
poke bad.qcow2 $((L2 + 8 * 3)) "$(be64 $(( (1 << 63) | L2 )))"   # guest 192K: the table
qemu-img convert -O raw bad.qcow2 before.raw

cp bad.qcow2 mine.qcow2
rc=0; "$DISKIMG" check -r all mine.qcow2 > out 2> err || rc=$?
grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "sanitizer"; }
[ $rc = 2 ] || { cat err; fail "exit $rc, not 2 (the flags in the table are left)"; }
grep -q "^ERROR OFLAG_COPIED data cluster: l2_entry=$(printf '%x' $(( (1 << 63) | L2 )))" err ||
    { cat err; fail "the flag left is not reported"; }
grep -q "^Repairing cluster $((L2 / 65536)) refcount=1 reference=2" err || { cat err; fail "refcount not raised"; }
qemu-img convert -O raw mine.qcow2 after.raw
cmp before.raw after.raw || fail "the repair changed guest data"

# a misaligned preallocated zero cluster in that table is left too (the
# zero-cluster fix would rewrite guest bytes), and counted as the reference
# it still is: its cluster (past the data, refcount 1) is no leak to lower
# to 0 -- a second repair finds nothing more to do
REFT=$(peek64 plain.qcow2 48); RB=$(peek64 plain.qcow2 "$REFT")
NCL=$(( $(stat -c %s plain.qcow2) / 65536 ))
cp bad.qcow2 bad2.qcow2
truncate -s $(( (NCL + 1) * 65536 )) bad2.qcow2
poke bad2.qcow2 $((RB + 2 * NCL)) 0001
poke bad2.qcow2 $((L2 + 8 * 5)) "$(be64 $(( (1 << 63) | (NCL * 65536 + 0x200) | 1 )))"
guest() { qemu-io -c "read -v 0 320k" "$1" 2>/dev/null | grep -v "^read\|ops/sec"; }
guest bad2.qcow2 > before.txt
cp bad2.qcow2 mine.qcow2
rc=0; "$DISKIMG" check -r all mine.qcow2 > out 2> err || rc=$?
[ $rc = 2 ] || { cat err; fail "misaligned: exit $rc, not 2"; }
grep -q "^ERROR offset=$(printf '%x' $((NCL * 65536 + 0x200))): Preallocated cluster is not properly aligned" err ||
    { cat err; fail "misaligned: not reported as left"; }
grep -q "Repairing cluster $NCL refcount=1 reference=0" err && fail "misaligned: its cluster freed"
cp mine.qcow2 again.qcow2
"$DISKIMG" check -r all again.qcow2 > /dev/null 2>&1
cmp -s mine.qcow2 again.qcow2 || fail "misaligned: a second repair changed the image"
guest mine.qcow2 > after.txt
cmp -s before.txt after.txt || fail "misaligned: the repair changed guest data"
exit 0
