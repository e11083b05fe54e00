#!/bin/bash
# check -r all of a dirty qcow2 image whose refcount table names a
# misaligned refcount block: the refcounts it covers cannot be read (check
# errors), so the structure is rebuilt.  Those errors were about the old
# structure, gone after the rebuild, yet they kept the repair from
# clearing the dirty bit (as qemu-img does too): the image checked clean and
# stayed marked dirty, and a second repair changed it again.  Now the
# rebuild settles them: the dirty bit is cleared, a second repair writes
# nothing, the guest data is as before.  Found by fuzz_qcow2_repair.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 plain.qcow2 4M
qemu-io -c 'write -P 0x71 0 200k' plain.qcow2 > /dev/null
REFT=$(peek64 plain.qcow2 48); RB=$(peek64 plain.qcow2 "$REFT")
cp plain.qcow2 bad.qcow2
poke bad.qcow2 "$REFT" "$(be64 $((RB + 512)))"    # misaligned: unreadable
poke bad.qcow2 79 01                              # dirty
cp bad.qcow2 mine.qcow2
"$DISKIMG" check -r all mine.qcow2 > out 2> err || { cat err; fail "check -r all: exit $?"; }
grep -q "Can't get refcount for cluster" err || { cat err; fail "no unreadable refcounts"; }
grep -q "Rebuilding refcount structure" err || fail "not rebuilt"
[ "$(od -A n -t x1 -j 79 -N 1 mine.qcow2 | tr -d ' ')" = 00 ] || fail "the dirty bit is still set"
cp mine.qcow2 again.qcow2
"$DISKIMG" check -r all again.qcow2 > out 2> err || { cat err; fail "second check -r all"; }
cmp -s mine.qcow2 again.qcow2 || fail "a second repair changed the image"
qemu-img check -q mine.qcow2 || fail "qemu-img check"
qemu-img compare -q plain.qcow2 mine.qcow2 || fail "guest data changed"
exit 0
