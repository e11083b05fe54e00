#!/bin/bash
# convert -n into an existing qcow2 image (qemu-img's habit: create the
# target with the options you want, then fill it).  The same target is
# prepared twice -- data, zero, compressed and unallocated clusters, larger
# than the source -- and filled once by qemu-img convert -n and once by
# diskimg: the two must read back identical (qemu-img compare, including
# the range past the source that -n leaves alone), pass qemu-img check
# with no leaks, and ours may not allocate more (+5%).  Across versions,
# extended L2 entries, backing files, cluster sizes, refcount widths, -c,
# -W, a source that ends inside a cluster, internal snapshots (kept as
# they were), qcow2 on a block device.  Then the refusals (nothing
# written), and a write error part-way: exit 1 and an image that still
# checks clean apart from leaked clusters.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T"

gen -s 71 -m 4K -M 256K 20M src.raw
# ends inside a cluster (on a sector: qemu-img rounds a raw file's size up
# to 512 bytes and writes zeros there, diskimg keeps the exact size)
head -c $((5 * 1024 * 1024 + 25 * 512)) src.raw > odd.raw

# make_target NAME OPTS [BACKING]: a 24 MiB image with content of every
# kind (with TAIL_ONLY=1 only past the source's end: qemu-img -c cannot
# write compressed clusters over allocated ones)
make_target() {
    local b=() io=(-c 'write -P 0x44 22M 2M')
    [ -n "${3:-}" ] && b=(-b "$3" -F qcow2)
    [ "${TAIL_ONLY:-0}" = 1 ] ||
        io+=(-c 'write -P 0x11 0 6M' -c 'write -z 1M 1M' -c 'write -c -P 0x33 8M 2M'
             -c 'discard 3M 64k')
    qemu-img create -q -f qcow2 -o "$2" "${b[@]}" "$1" 24M || fail "create $1 ($2)"
    qemu-io "${io[@]}" "$1" >/dev/null || fail "qemu-io $1"
}

qemu-img create -q -f qcow2 base.qcow2 24M
qemu-io -c 'write -P 0x22 0 24M' base.qcow2 >/dev/null || fail "base"

case_n=0
run_case() {  # SRC OPTS BACKING DISKIMG-FLAGS...
    local src=$1 opts=$2 bk=$3
    shift 3
    case_n=$((case_n + 1))
    make_target q.qcow2 "$opts" "$bk"
    cp q.qcow2 d.qcow2
    # qemu-img's reference without -W: qemu-img 7.2's -n -W into a qcow2
    # image now and then writes a cluster it has not counted (its own check
    # then reports "refcount=0 reference=1"; 3 times in some 350 runs, each
    # time on a busy machine)
    local q=() skip=0 a
    for a in "$@"; do
        if [ $skip = 1 ]; then skip=0; continue; fi
        case $a in -W) ;; -m) skip=1 ;; *) q+=("$a") ;; esac
    done
    qemu-img convert -n -O qcow2 "${q[@]}" "$src" q.qcow2 || fail "qemu-img convert -n ($opts $*)"
    ok "$DISKIMG" convert -n -O qcow2 "$@" "$src" d.qcow2
    qemu-img check -q d.qcow2 || fail "check after -n ($opts, backing '$bk', $*)"
    qemu-img check d.qcow2 | grep -q 'leaked' && fail "leaks after -n ($opts $*)"
    qemu-img compare -q q.qcow2 d.qcow2 ||
        fail "-n ($opts, backing '$bk', $*): differs from qemu-img's -n"
    rm -f rb.raw
    ok "$DISKIMG" convert -t unsafe -O raw d.qcow2 rb.raw
    cmp -n "$(stat -c %s "$src")" "$src" rb.raw || fail "-n ($opts $*): source not in place"
    [ "$(alloc d.qcow2)" -le $(( $(alloc q.qcow2) * 21 / 20 + 65536 )) ] ||
        fail "-n ($opts $*): $(alloc d.qcow2) bytes allocated, qemu-img's $(alloc q.qcow2)"
}

# (512-byte clusters with 64-bit refcounts: the refcount table has to move,
# several times, while the conversion runs)
for opts in compat=1.1 compat=0.10 compat=1.1,extended_l2=on \
            compat=1.1,cluster_size=512 compat=1.1,cluster_size=2M \
            compat=1.1,refcount_bits=1 compat=0.10,cluster_size=4k compat=1.1,refcount_bits=64 \
            compat=1.1,compression_type=zstd,lazy_refcounts=on \
            compat=1.1,cluster_size=512,refcount_bits=64; do
    run_case src.raw "$opts" ""
    run_case src.raw "$opts" base.qcow2
done
run_case odd.raw compat=1.1 ""
run_case odd.raw compat=1.1,extended_l2=on base.qcow2
run_case odd.raw compat=0.10 base.qcow2
run_case src.raw compat=1.1 "" -W -m 4
# -c with 1-bit refcounts: qemu-img 7.2 fails with EIO (a host cluster
# shared by two compressed clusters needs refcount 2); diskimg gives each
# its own host cluster
make_target r1.qcow2 compat=1.1,refcount_bits=1 ""
ok "$DISKIMG" convert -c -n -O qcow2 src.raw r1.qcow2
qemu-img check -q r1.qcow2 || fail "check -c into refcount_bits=1"
qemu-img check r1.qcow2 | grep -q 'leaked' && fail "leaks: -c into refcount_bits=1"
qemu-img check r1.qcow2 | grep -q ' [1-9][0-9.]*% compressed' || fail "-c wrote nothing compressed"
ok "$DISKIMG" convert -t unsafe -O raw r1.qcow2 r1.raw
cmp -n 20971520 src.raw r1.raw || fail "-c into refcount_bits=1: content"
TAIL_ONLY=1 run_case src.raw compat=1.1,compression_type=zstd base.qcow2 -c
TAIL_ONLY=1 run_case src.raw compat=1.1,cluster_size=4k "" -c
# -c over data, zero and compressed clusters (qemu-img fails with EIO)
make_target c.qcow2 compat=1.1 ""
ok "$DISKIMG" convert -c -n -O qcow2 src.raw c.qcow2
qemu-img check -q c.qcow2 || fail "check -c over content"
qemu-img check c.qcow2 | grep -q 'leaked' && fail "leaks: -c over content"
ok "$DISKIMG" convert -t unsafe -O raw c.qcow2 c.raw
cmp -n 20971520 src.raw c.raw || fail "-c over content: content"
qemu-io -r -c 'read -P 0x44 22M 2M' c.qcow2 | grep -q '^read' || fail "-c: tail lost"
# ... and a source that ends inside a cluster: compressed with the image's
# own bytes after the end (qemu-img refuses the unaligned write)
make_target c2.qcow2 compat=1.1 ""
ok "$DISKIMG" convert -c -n -O qcow2 odd.raw c2.qcow2
qemu-img check -q c2.qcow2 || fail "check -c, odd source"
ok "$DISKIMG" convert -t unsafe -O raw c2.qcow2 c2.raw
cmp -n "$(stat -c %s odd.raw)" odd.raw c2.raw || fail "-c, odd source: content"
qemu-io -r -c "read -P 0x11 $(stat -c %s odd.raw) $((6 * 1048576 - $(stat -c %s odd.raw)))" \
    c2.qcow2 | grep -q '^read' || fail "-c, odd source: the image's bytes after the end lost"
run_case src.raw compat=1.1 "" -S 0
# --target-is-zero over a fresh image, and a qcow2 source
qemu-img create -q -f qcow2 fresh.qcow2 20M
ok "$DISKIMG" convert -n --target-is-zero -O qcow2 src.raw fresh.qcow2
qemu-img check -q fresh.qcow2 || fail "check --target-is-zero"
qcompare src.raw fresh.qcow2
qemu-img convert -O qcow2 -c src.raw srcc.qcow2
qemu-img create -q -f qcow2 -o cluster_size=16k fresh2.qcow2 20M
ok "$DISKIMG" convert -n -O qcow2 srcc.qcow2 fresh2.qcow2
qemu-img check -q fresh2.qcow2 || fail "check qcow2 source"
qcompare src.raw fresh2.qcow2
# a block-device-like target reached through a symlink keeps its inode
ln -s fresh2.qcow2 link.qcow2
ino=$(stat -c %i fresh2.qcow2)
ok "$DISKIMG" convert -n -O qcow2 odd.raw link.qcow2
[ "$(stat -c %i fresh2.qcow2)" = "$ino" ] || fail "-n replaced the file"
[ -L link.qcow2 ] || fail "-n replaced the symlink"

# qcow2 on a block device (a loop device, where this machine allows one):
# new clusters go after the image's last one, not after the device's end --
# 4 KiB clusters, so the data outgrows the one refcount block qemu-img made
loops=()
trap 'for l in "${loops[@]}"; do losetup -d "$l"; done' EXIT
if truncate -s 40M dev1.img dev2.img dev3.img &&
   l1=$(losetup -f --show dev1.img 2>/dev/null) && loops+=("$l1") &&
   l2=$(losetup -f --show dev2.img 2>/dev/null) && loops+=("$l2") &&
   truncate -s 6M dev3.img && l3=$(losetup -f --show dev3.img 2>/dev/null) && loops+=("$l3"); then
    for l in "$l1" "$l2"; do
        qemu-img create -q -f qcow2 -o cluster_size=4k "$l" 24M || fail "create on $l"
        qemu-io -c 'write -P 0x44 22M 2M' -c 'write -P 0x11 0 3M' "$l" >/dev/null || fail "qemu-io $l"
    done
    qemu-img convert -n -O qcow2 src.raw "$l2" || fail "qemu-img -n onto $l2"
    ok "$DISKIMG" convert -n -O qcow2 src.raw "$l1"
    qemu-img check -q "$l1" || fail "check on a block device"
    qemu-img compare -q "$l2" "$l1" || fail "-n on a block device differs from qemu-img's"
    # a device too small for the data: ENOSPC, exit 1, the image consistent
    qemu-img create -q -f qcow2 -o cluster_size=4k "$l3" 24M || fail "create on $l3"
    expect_error "$l3: .*No space left on device" "$DISKIMG" convert -n -O qcow2 src.raw "$l3"
    rc=0
    qemu-img check "$l3" > chk.txt 2>&1 || rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 3 ] || { cat chk.txt >&2; fail "full device: check exit $rc"; }
else
    echo "no loop device here: the block-device cases are skipped"
fi

# internal snapshots: the active image changes, every snapshot keeps its
# content (shared clusters and L2 tables are copied, not overwritten)
for c in 1.1 0.10; do
    make_target snap.qcow2 compat=$c ""
    qemu-img snapshot -c s1 snap.qcow2 || fail "snapshot s1"
    qemu-io -c 'write -P 0x66 4M 4M' -c 'write -z 12M 1M' snap.qcow2 >/dev/null || fail "qemu-io"
    qemu-img snapshot -c s2 snap.qcow2 || fail "snapshot s2"
    for s in s1 s2; do
        qemu-img convert -O raw -l $s snap.qcow2 $s.before.raw || fail "export $s"
    done
    cp snap.qcow2 qsnap.qcow2
    qemu-img convert -n -O qcow2 src.raw qsnap.qcow2 || fail "qemu-img -n with snapshots"
    ok "$DISKIMG" convert -n -O qcow2 src.raw snap.qcow2
    qemu-img check -q snap.qcow2 || fail "check -n with snapshots (compat=$c)"
    qemu-img check snap.qcow2 | grep -q 'leaked' && fail "leaks: -n with snapshots"
    qemu-img compare -q qsnap.qcow2 snap.qcow2 || fail "-n with snapshots differs from qemu-img's"
    for s in s1 s2; do
        rm -f $s.after.raw
        ok "$DISKIMG" convert -t unsafe -l $s -O raw snap.qcow2 $s.after.raw
        cmp $s.before.raw $s.after.raw || fail "-n changed snapshot $s (compat=$c)"
    done
    [ "$(alloc snap.qcow2)" -le $(( $(alloc qsnap.qcow2) * 21 / 20 + 65536 )) ] ||
        fail "-n with snapshots: $(alloc snap.qcow2) bytes allocated, qemu-img's $(alloc qsnap.qcow2)"
done

# --- refusals: a clear message and the image untouched ---------------------------
untouched() {  # IMG: unchanged since its checksum was taken
    [ "$(sha1sum < "$1")" = "$(cat "$1.sum")" ] || fail "$1 was changed by a refused -n"
}
refused() {  # REGEX IMG ARGS...
    local re=$1 img=$2
    shift 2
    sha1sum < "$img" > "$img.sum"
    expect_error "$re" "$DISKIMG" convert -n -O qcow2 "$@" src.raw "$img"
    untouched "$img"
}
qemu-img create -q -f qcow2 small.qcow2 16M
refused 'small.qcow2: output file is smaller than input file' small.qcow2
# (persistent bitmaps record the writes: convert-bitmaps.sh)
qemu-img create -q -f qcow2 -o data_file=df.raw df.qcow2 24M
refused 'df.qcow2: .*external data file' df.qcow2
make_target dirty.qcow2 compat=1.1 ""
printf '\x01' | dd of=dirty.qcow2 bs=1 seek=79 conv=notrunc status=none
refused 'dirty.qcow2: .*dirty bit' dirty.qcow2
# corrupt metadata: an L2 entry naming the L1 table's cluster (overwriting
# "data" there would destroy the L1 table)
make_target bad.qcow2 compat=1.1 ""
l1=$(od -An -tx1 -j40 -N8 bad.qcow2 | tr -d ' \n')
l2=$(od -An -tx1 -j$((0x$l1)) -N8 bad.qcow2 | tr -d ' \n')
l2=$(( 0x$l2 & 0x00fffffffffffe00 ))
printf "$(printf '%016x' $(( 0x$l1 | (1 << 63) )) | sed 's/../\\x&/g')" |
    dd of=bad.qcow2 bs=1 seek=$((l2 + 8 * 4)) conv=notrunc status=none
refused 'bad.qcow2: the image has [0-9]+ corruptions.*check -r all' bad.qcow2
make_target ok.qcow2 compat=1.1 ""
refused '-o has no effect when skipping image creation' ok.qcow2 -o cluster_size=4k
refused 'ok.qcow2: -B cannot be used with -n' ok.qcow2 -B base.qcow2
# -n without -O means raw (qemu-img's default), which over a qcow2 image is
# almost always a forgotten -O: refused; -O raw replaces it as asked
sha1sum < ok.qcow2 > ok.qcow2.sum
expect_error 'ok.qcow2: the target is a qcow2 image and -n without -O would overwrite it as raw; pass -O qcow2' \
    "$DISKIMG" convert -n src.raw ok.qcow2
untouched ok.qcow2
cp ok.qcow2 ok2.qcow2 && truncate -s 24M ok2.qcow2
ok "$DISKIMG" convert -n -O raw src.raw ok2.qcow2
cmp -n 20971520 src.raw ok2.qcow2 || fail "-n -O raw over a qcow2 image"
qemu-img create -q -f vmdk v.vmdk 24M
refused_plain() {  # REGEX IMG ARGS...: like refused, without -O
    local re=$1 img=$2
    shift 2
    sha1sum < "$img" > "$img.sum"
    expect_error "$re" "$DISKIMG" convert -n "$@" src.raw "$img"
    untouched "$img"
}
refused_plain 'v.vmdk: the target is a vmdk image .*writing into an existing vmdk image is not supported, or -O raw' v.vmdk
refused_plain 'v.vmdk: not a qcow2 image' v.vmdk -O qcow2
truncate -s 24M r.raw
refused_plain 'r.raw: not a qcow2 image' r.raw -O qcow2
expect_error 'missing.qcow2: target does not exist' \
    "$DISKIMG" convert -n -O qcow2 src.raw missing.qcow2
[ -e missing.qcow2 ] && fail "-n created a target"

# --- killed part-way (every write slowed): the image checks clean apart from
# leaked clusters, and the snapshot keeps its content -------------------------------
for at in 0.3 0.8 1.5; do
    make_target k.qcow2 compat=1.1,cluster_size=4k ""
    qemu-img snapshot -c s1 k.qcow2 || fail "snapshot"
    qemu-img convert -O raw -l s1 k.qcow2 ks1.raw || fail "export s1"
    DISKIMG_FAULT=write:1+:delay40 "$DISKIMG" convert -n -O qcow2 src.raw k.qcow2 2>kill.err &
    pid=$!
    sleep "$at"
    kill -0 $pid 2>/dev/null || { cat kill.err >&2; fail "kill at ${at}s: ended before it was killed"; }
    kill -9 $pid
    wait $pid 2>/dev/null
    rc=0
    qemu-img check k.qcow2 > chk.txt 2>&1 || rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 3 ] || { cat chk.txt >&2; fail "killed at ${at}s: check exit $rc"; }
    qemu-img convert -O raw -l s1 k.qcow2 ks1.after.raw || fail "export s1 after the kill"
    cmp ks1.raw ks1.after.raw || fail "killed at ${at}s: snapshot s1 changed"
    rm -f ks1.raw ks1.after.raw
done

# --- a write error part-way: exit 1, the image consistent (leaks at most) --------
for n in 3 10 40; do
    make_target f.qcow2 compat=1.1 ""
    DISKIMG_FAULT="write:$n:EIO" expect_error 'f.qcow2' \
        "$DISKIMG" convert -n -O qcow2 src.raw f.qcow2
    qemu-img check f.qcow2 > chk.txt 2>&1
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 3 ] || { cat chk.txt >&2; fail "EIO at write $n: check exit $rc"; }
done
exit 0
