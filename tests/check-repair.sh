#!/bin/bash
# diskimg check -r leaks|all against qemu-img check -r on copies of the same
# damaged images (made by patching bytes of qemu-img images): the same exit
# status, the same repaired counts and JSON, the same summary text and the
# same problem lines; the repaired image passes qemu-img check exactly when
# qemu's does, and its content is unchanged.  Also: refcount widths, 512-byte
# clusters with several refcount blocks, snapshots and compressed clusters,
# extended L2, v2, a dirty lazy-refcounts image (the dirty bit is cleared),
# and a repair interrupted at every write (it can always be finished).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
. "$(dirname "$0")/qcow2/repair.sh"
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 plain.qcow2 4M
qemu-io -t unsafe -c 'write -P 0x71 0 200k' -c 'write -P 0x72 3M 64k' plain.qcow2 >/dev/null
REFT=$(peek64 plain.qcow2 48); RB=$(peek64 plain.qcow2 "$REFT"); L1=$(peek64 plain.qcow2 40)
L2=$(( $(peek64 plain.qcow2 "$L1") & 0x00fffffffffffe00 ))
NCL=$(( $(stat -c %s plain.qcow2) / 65536 ))
DATA=$(( $(peek64 plain.qcow2 "$L2") & 0x00fffffffffffe00 ))

n=0
damage() {
    n=$((n + 1)); cp plain.qcow2 d$n.qcow2
    while [ $# -ge 2 ]; do poke d$n.qcow2 "$1" "$2"; shift 2; done
    same_repair d$n.qcow2 leaks plain.qcow2
    same_repair d$n.qcow2 all plain.qcow2
}
# a leaked cluster past the data; refcounts too low (0: rebuild) and too high
cp plain.qcow2 leak.qcow2
truncate -s $(( (NCL + 1) * 65536 )) leak.qcow2
poke leak.qcow2 $((RB + 2 * NCL)) 0001
HUMAN=1
same_repair leak.qcow2 leaks plain.qcow2
same_repair leak.qcow2 all plain.qcow2
grep -q "Repairing cluster $NCL refcount=1 reference=0" mine.err || fail "leak repair not named"
damage $((RB + 2 * DATA / 65536)) 0000                    # used cluster, refcount 0
damage $((RB + 2 * DATA / 65536)) 0002                    # refcount 2, one reference
HUMAN=0
damage $((RB + 2 * 3)) 0000 $((RB + 2 * 9)) 0003          # L1 and data: rebuild + leak
damage "$((L2 + 7))" 02                                   # reserved bit: not repairable
damage "$L2" 8000000000050200                             # misaligned data cluster
damage "$L2" "$(be64 $(( (1 << 63) | (1000 << 16) )))"    # data cluster past the end
damage "$L1" 8000000000f00000                             # L2 table past the end
damage "$L2" 0000000000050000                             # copied flag missing
damage "$L1" 0000000000040000                             # L1 copied flag missing
damage "$REFT" 0000000100000000                           # refcount block outside the image
damage "$((RB + 4))" 0002                                 # refcount block's own refcount 2
damage "$((RB + 2 * 2))" 0000                             # refcount block's own refcount 0

# refcount table entry with reserved bits: qemu-img fails (its overlap check
# stops the rebuild and marks the image corrupt); diskimg rebuilds
cp plain.qcow2 rt.qcow2; poke rt.qcow2 "$REFT" 0000000000020100
"$DISKIMG" check -r all rt.qcow2 > /dev/null 2>&1 || fail "reftable reserved bits: not repaired"
qemu-img check -q rt.qcow2 || fail "reftable reserved bits: repaired image does not check"
qemu-img compare -q plain.qcow2 rt.qcow2 || fail "reftable reserved bits: content changed"

# snapshots and compressed clusters (shared clusters, refcounts above 1)
qemu-img create -q -f qcow2 -o cluster_size=4k frag.qcow2 4M
qemu-io -t unsafe -c 'write -P 1 0 64k' -c 'write -P 2 1M 40k' -c 'write -P 3 8k 64k' frag.qcow2 >/dev/null
qemu-img convert -c -O qcow2 frag.qcow2 rich.qcow2
qemu-img snapshot -c one rich.qcow2
qemu-io -t unsafe -c 'write -P 5 0 4k' -c 'write -P 6 64k 4k' rich.qcow2 >/dev/null
qemu-img snapshot -c two rich.qcow2
RT=$(peek64 rich.qcow2 48); RB2=$(peek64 rich.qcow2 "$RT")
cp rich.qcow2 r1.qcow2; poke r1.qcow2 $((RB2 + 2 * 3)) 0000; poke r1.qcow2 $((RB2 + 2 * 20)) 0005
same_repair r1.qcow2 leaks; same_repair r1.qcow2 all rich.qcow2
cp rich.qcow2 r2.qcow2; poke r2.qcow2 "$RT" 0000000000000000
same_repair r2.qcow2 all rich.qcow2
cp rich.qcow2 r3.qcow2; poke r3.qcow2 $((RB2 + 2 * 5)) 0001
same_repair r3.qcow2 leaks; same_repair r3.qcow2 all rich.qcow2
"$DISKIMG" info mine.qcow2 | grep -q "two" || fail "snapshots lost in the repair"

# 512-byte clusters: many refcount blocks, a refcount table of several clusters
qemu-img create -q -f qcow2 -o cluster_size=512 small.qcow2 12M
qemu-io -t unsafe -c 'write -P 1 0 9M' small.qcow2 >/dev/null
RT=$(peek64 small.qcow2 48)
cp small.qcow2 s1.qcow2; poke s1.qcow2 $((RT + 8)) 0000000000000000
same_repair s1.qcow2 all small.qcow2
cp small.qcow2 s2.qcow2; poke s2.qcow2 "$RT" 0000000000000000
same_repair s2.qcow2 all small.qcow2

# refcount widths 1..64
for rb in 1 2 8 64; do
    qemu-img create -q -f qcow2 -o refcount_bits=$rb,cluster_size=4k rb.qcow2 2M
    qemu-io -t unsafe -c 'write -P 1 0 300k' -c 'write -P 2 1M 8k' rb.qcow2 >/dev/null
    RT=$(peek64 rb.qcow2 48); RB3=$(peek64 rb.qcow2 "$RT")
    cp rb.qcow2 rb-a.qcow2; poke rb-a.qcow2 $((RB3 + 8)) 00
    same_repair rb-a.qcow2 all rb.qcow2
    cp rb.qcow2 rb-b.qcow2; truncate -s +8k rb-b.qcow2; poke rb-b.qcow2 $((RB3 + 20 * rb / 8)) ff
    same_repair rb-b.qcow2 leaks rb.qcow2
done

# extended L2, v2 with a snapshot, a misaligned preallocated zero cluster
qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=64k xl.qcow2 4M
qemu-io -t unsafe -c 'write -P 1 0 5k' -c 'write -P 2 1M 300k' xl.qcow2 >/dev/null
RT=$(peek64 xl.qcow2 48); RB3=$(peek64 xl.qcow2 "$RT")
cp xl.qcow2 x1.qcow2; poke x1.qcow2 $((RB3 + 2 * 5)) 0000
same_repair x1.qcow2 all xl.qcow2
qemu-img create -q -f qcow2 -o compat=0.10 v2.qcow2 2M
qemu-io -t unsafe -c 'write -P 1 0 64k' v2.qcow2 >/dev/null
qemu-img snapshot -c s v2.qcow2
RT=$(peek64 v2.qcow2 48); RB3=$(peek64 v2.qcow2 "$RT")
cp v2.qcow2 v.qcow2; poke v.qcow2 $((RB3 + 2 * 3)) 0000
same_repair v.qcow2 all v2.qcow2; same_repair v.qcow2 leaks
qemu-img create -q -f qcow2 -o preallocation=metadata,cluster_size=4k pm.qcow2 1M
L1P=$(peek64 pm.qcow2 40); L2P=$(( $(peek64 pm.qcow2 "$L1P") & 0x00fffffffffffe00 ))
cp pm.qcow2 p1.qcow2; poke p1.qcow2 "$L2P" "$(be64 $(( $(peek64 pm.qcow2 "$L2P") | 0x201 )))"
same_repair p1.qcow2 all; same_repair p1.qcow2 leaks

# lazy refcounts left dirty by a killed writer: repaired, dirty bit cleared
qemu-img create -q -f qcow2 -o lazy_refcounts=on lazy.qcow2 1M
sh -c 'qemu-io -t unsafe -c "write -P 0x99 0 192k" -c "write -P 0x98 512k 64k" -c abort "$1"' \
    sh lazy.qcow2 >/dev/null 2>&1 || true
same_repair lazy.qcow2 leaks; same_repair lazy.qcow2 all
"$DISKIMG" info --output=json mine.qcow2 | grep -q '"dirty-flag": false' || fail "dirty bit kept"
# the dirty and corrupt bits of a sound image are cleared too
cp plain.qcow2 flags.qcow2; poke flags.qcow2 79 03
same_repair flags.qcow2 leaks
[ "$(od -A n -t x1 -j 79 -N 1 mine.qcow2 | tr -d ' ')" = 00 ] || fail "dirty/corrupt bits kept"
# nothing to repair: nothing written
cp plain.qcow2 clean.qcow2
"$DISKIMG" check -r all clean.qcow2 > out.txt || fail "clean image: exit $?"
grep -q "repaired" out.txt && fail "clean image: repairs reported"
cmp -s plain.qcow2 clean.qcow2 || fail "clean image was changed"

# a repair stopped at any write (as by a crash) can always be finished: the
# image is never worse than before, and a second run repairs it
cp plain.qcow2 cr.qcow2
poke cr.qcow2 $((RB + 2 * 3)) 0000      # L1 with refcount 0: a rebuild
truncate -s $(( (NCL + 1) * 65536 )) cr.qcow2; poke cr.qcow2 $((RB + 2 * NCL)) 0001
for w in $(seq 1 2 40); do
    cp cr.qcow2 int.qcow2
    rc=0; env DISKIMG_FAULT=write:$w+:EIO "$DISKIMG" check -r all int.qcow2 >/dev/null 2>err || rc=$?
    grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "sanitizer: write $w"; }
    [ $rc = 0 ] && break
    [ $rc = 1 ] || fail "repair stopped at write $w: exit $rc"
    qrc=0; qemu-img check int.qcow2 >/dev/null 2>&1 || qrc=$?
    [ $qrc = 2 ] || [ $qrc = 3 ] || [ $qrc = 0 ] || fail "repair stopped at write $w: qemu-img check exits $qrc"
    "$DISKIMG" check -r all int.qcow2 > /dev/null 2>&1 || fail "stopped at write $w: second repair failed"
    qemu-img check -q int.qcow2 || fail "stopped at write $w: not repaired"
    qemu-img compare -q plain.qcow2 int.qcow2 || fail "stopped at write $w: content changed"
done
[ $rc = 0 ] || fail "the repair needs more than 40 writes?"
[ "$w" -gt 3 ] || fail "the repair took only $w writes"
cp cr.qcow2 int.qcow2
expect_error "fsync failed" env DISKIMG_FAULT=sync:2:EIO "$DISKIMG" check -r all int.qcow2
"$DISKIMG" check -r all int.qcow2 > /dev/null 2>&1 && qemu-img check -q int.qcow2 ||
    fail "after a failed fsync: not repairable"

# errors
expect_error "expecting 'leaks' or 'all'" "$DISKIMG" check -r some plain.qcow2
chmod 444 d1.qcow2
if [ "$(id -u)" != 0 ]; then
    expect_error "ermission" "$DISKIMG" check -r all d1.qcow2
fi
exit 0
