#!/bin/bash
# check -r all on refcount table entries that name a refcount block so far
# past the end of the file that "extend the file to cover it" overflows:
# 0xffffffffffff0000 plus a 64 KiB cluster wraps to 0 (the repair once cut
# the file to nothing, rebuilt refcounts into it and said "No errors were
# found": magic and guest data gone).  As qemu-img check -r all: the file is
# not resized ("could not resize image"), the refcounts are rebuilt, the
# result checks clean and holds the same guest data.  Entries a file can
# reach are made reachable (the file grows, never shrinks); one further out
# than a repair grows a file is rebuilt instead.  With -r leaks nothing is
# repaired.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
. "$(dirname "$0")/qcow2/repair.sh"
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 plain.qcow2 4M
qemu-io -c 'write -P 0x71 0 200k' -c 'write -P 0x72 3M 64k' plain.qcow2 > /dev/null
REFT=$(peek64 plain.qcow2 48)
SIZE=$(stat -c %s plain.qcow2)

# kept IMG: the file is a qcow2 image at least as long as before, with the
# guest data of plain.qcow2
kept() {
    [ "$(od -A n -t x1 -N 4 "$1" | tr -d ' ')" = 514649fb ] || fail "$1: the magic is gone"
    [ "$(stat -c %s "$1")" -ge "$SIZE" ] || fail "$1: the file was cut"
    qemu-img check -q "$1" || fail "$1: does not check clean after the repair"
    qemu-img compare -q plain.qcow2 "$1" || fail "$1: guest data changed"
}

for e in ffffffffffff0000 fffffffffffe0000 8000000000000000 7fffffffffff0000; do
    cp plain.qcow2 w.qcow2
    poke w.qcow2 $((REFT + 8)) "$e"
    HUMAN=1 same_repair w.qcow2 all plain.qcow2
    grep -q "could not resize image" mine.err || fail "$e: no refusal to resize"
    grep -q "Rebuilding refcount structure" mine.err || fail "$e: not rebuilt"
    kept mine.qcow2
    same_repair w.qcow2 leaks
    cmp -s w.qcow2 mine.qcow2 || fail "$e: -r leaks changed the image"
done

# reachable: the file grows to hold the block (as qemu-img)
cp plain.qcow2 g.qcow2
poke g.qcow2 $((REFT + 8)) "$(be64 $((64 << 20)))"
same_repair g.qcow2 all plain.qcow2
kept mine.qcow2

# further past the end than a repair grows a file (2^20 clusters: 64 GiB
# here): not extended, rebuilt (a hostile pointer must not make a file of
# terabytes); qemu-img would make an 80 GiB sparse file, so only the
# outcome is compared
cp plain.qcow2 b.qcow2
poke b.qcow2 $((REFT + 8)) "$(be64 $((80 << 30)))"
cp b.qcow2 mine.qcow2
"$DISKIMG" check -r all mine.qcow2 > out 2> err || { cat err; fail "80 GiB block: not repaired"; }
grep -q "ERROR could not resize image: File too large" err || fail "80 GiB block: no refusal to resize"
[ "$(stat -c %s mine.qcow2)" -lt $((1 << 30)) ] || fail "80 GiB block: the file was grown"
kept mine.qcow2
exit 0
