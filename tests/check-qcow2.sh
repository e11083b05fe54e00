#!/bin/bash
# diskimg check against qemu-img check on the same images: exit status,
# JSON (same keys, values and order), human summary and per-problem lines.
# Clean images of many kinds (exit 0), a leaked cluster (3), corruptions (2),
# a format without checks (63), an image that cannot be opened (1).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
# same_check IMG EXPECTED-EXIT: diskimg and qemu-img agree on everything
same_check() {
    local img=$1 want=$2 rc=0 qrc=0
    "$DISKIMG" check --output=json "$img" > mine.json 2> mine.err || rc=$?
    qemu-img check --output=json "$img" > ref.json 2> ref.err || qrc=$?
    [ $qrc = "$want" ] || fail "$img: qemu-img check exits $qrc, the test expects $want"
    [ $rc = "$want" ] || { cat mine.err; fail "$img: check exits $rc, expected $want"; }
    grep -q "AddressSanitizer\|runtime error" mine.err && fail "sanitizer: $img"
    cmp mine.json ref.json || { diff mine.json ref.json; fail "$img: JSON differs from qemu-img's"; }
    # qemu-img prints some problem lines twice; compare the set of lines
    sort -u mine.err | grep -v '^diskimg: ' > mine.lines
    sort -u ref.err | grep -v '^qemu-img: ' > ref.lines
    cmp mine.lines ref.lines || { diff mine.lines ref.lines; fail "$img: problem lines differ"; }
    rc=0; qrc=0
    "$DISKIMG" check "$img" > mine.txt 2>/dev/null || rc=$?
    qemu-img check "$img" > ref.txt 2>/dev/null || qrc=$?
    cmp mine.txt ref.txt || { diff mine.txt ref.txt; fail "$img: human output differs"; }
}

# clean images
qemu-img create -q -f qcow2 plain.qcow2 4M
qemu-io -c 'write -P 0x71 0 200k' -c 'write -P 0x72 3M 64k' plain.qcow2 >/dev/null
same_check plain.qcow2 0
qemu-img create -q -f qcow2 empty.qcow2 1G
same_check empty.qcow2 0
qemu-img create -q -f qcow2 -o cluster_size=4k frag.qcow2 4M
qemu-io -c 'write -P 1 0 64k' -c 'write -P 2 1M 40k' -c 'write -P 3 8k 64k' -c 'write -P 4 4k 4k' \
    frag.qcow2 >/dev/null
same_check frag.qcow2 0
qemu-img create -q -f qcow2 -o cluster_size=512 small.qcow2 1M
qemu-io -c 'write -P 1 0 64k' -c 'write -P 2 300k 40k' small.qcow2 >/dev/null
same_check small.qcow2 0
for ct in zlib zstd; do
    qemu-img convert -c -O qcow2 -o compression_type=$ct frag.qcow2 c-$ct.qcow2
    same_check c-$ct.qcow2 0
done
cp c-zlib.qcow2 rich.qcow2     # snapshots, bitmaps, compressed and plain clusters
qemu-img snapshot -c one rich.qcow2
qemu-io -c 'write -P 5 0 4k' rich.qcow2 >/dev/null
qemu-img bitmap --add rich.qcow2 b0
qemu-img bitmap --add -g 4096 rich.qcow2 b1
qemu-io -c 'write -P 6 64k 4k' rich.qcow2 >/dev/null
qemu-img snapshot -c two rich.qcow2
same_check rich.qcow2 0
qemu-img create -q -f qcow2 -o compat=0.10 v2.qcow2 2M
qemu-io -c 'write -P 1 0 64k' v2.qcow2 >/dev/null
qemu-img snapshot -c s v2.qcow2
same_check v2.qcow2 0
qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=128k xl.qcow2 4M
qemu-io -c 'write -P 1 0 5k' -c 'write -P 2 1M 300k' -c 'write -z 1100k 20k' xl.qcow2 >/dev/null
same_check xl.qcow2 0
qemu-img create -q -f qcow2 -o preallocation=metadata pm.qcow2 2M
same_check pm.qcow2 0
qemu-img create -q -f qcow2 -o refcount_bits=1 rb1.qcow2 2M
qemu-io -c 'write -P 1 0 64k' rb1.qcow2 >/dev/null
same_check rb1.qcow2 0

# the layout of plain.qcow2: reftable, refblock, L1, L2, data clusters
REFT=$(peek64 plain.qcow2 48)
RB=$(peek64 plain.qcow2 "$REFT")
L1=$(peek64 plain.qcow2 40)
L2=$(( $(peek64 plain.qcow2 "$L1") & 0x00fffffffffffe00 ))
NCL=$(( $(stat -c %s plain.qcow2) / 65536 ))

# a leaked cluster: one more cluster at the end, with refcount 1
cp plain.qcow2 leak.qcow2
truncate -s $(( (NCL + 1) * 65536 )) leak.qcow2
poke leak.qcow2 $((RB + 2 * NCL)) 0001
same_check leak.qcow2 3
grep -q "^Leaked cluster $NCL refcount=1 reference=0$" mine.err || fail "leak not named"

# corruptions: a data cluster with refcount 0 (also breaks its copied flag)
DATA=$(( $(peek64 plain.qcow2 "$L2") & 0x00fffffffffffe00 ))
cp plain.qcow2 cor.qcow2
poke cor.qcow2 $((RB + 2 * DATA / 65536)) 0000
same_check cor.qcow2 2
grep -q "^ERROR cluster $((DATA / 65536)) refcount=0 reference=1$" mine.err || fail "corruption not named"
cp leak.qcow2 both.qcow2
poke both.qcow2 $((RB + 2 * DATA / 65536)) 0000
same_check both.qcow2 2
# more kinds of damage
n=0
damage() {
    local want=$1; shift
    n=$((n + 1)); cp plain.qcow2 d$n.qcow2
    while [ $# -ge 2 ]; do poke d$n.qcow2 "$1" "$2"; shift 2; done
    same_check d$n.qcow2 "$want"
}
damage 2 "$((L2 + 7))" 02                                 # L2 entry reserved bit
damage 2 "$L2" 8000000000050200                           # misaligned data cluster
damage 2 "$L2" "$(be64 $(( (1 << 63) | (1000 << 16) )))"  # data cluster far past the end
damage 2 "$L1" 8100000000040000                           # L1 entry reserved bit
damage 2 "$L1" 8000000000f00000                           # L2 table past the end
damage 2 "$L2" 0000000000050000                           # copied flag missing
damage 2 "$L2" c000000000050000                           # compressed with copied flag
damage 2 "$REFT" 0000000000020100                         # refcount table reserved bits
damage 2 "$REFT" 0000000100000000                         # refcount block outside the image
damage 3 "$((RB + 4))" 0002                             # refblock's own refcount 2: a leak

# not checkable: a raw image (63), a file that is not there (1), -r (1)
head -c 1M /dev/zero > disk.raw
rc=0; "$DISKIMG" check disk.raw > /dev/null 2> err || rc=$?
[ $rc = 63 ] || fail "raw check exits $rc, expected 63"
grep -q "does not support checks" err || fail "raw check message"
expect_error "no such file" "$DISKIMG" check nothere.qcow2
exit 0
