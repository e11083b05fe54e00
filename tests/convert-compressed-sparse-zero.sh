#!/bin/bash
# -c -S 0: zeros the source's metadata knows (holes) are written, as -S 0
# asks, but compressed like every other granule, as qemu-img writes them
# (they used to go out as plain clusters: 10 MiB of holes made a 10.7 MB
# qcow2 where qemu-img's is 340 KB).  Sizes must stay within 25% of
# qemu-img's; content identical, check clean.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || exit 1
truncate -s 10M hole.raw
head -c 1M /dev/urandom > mixed.raw && truncate -s 11M mixed.raw
head -c 777 /dev/urandom >> mixed.raw          # a short last cluster after data
truncate -s 10001K odd.raw                     # a short last cluster of zeros

within() {          # WHAT OURS QEMUS
    [ "$2" -le $(($3 * 5 / 4)) ] || fail "$1: $2 bytes, qemu-img's $3 (more than 25% over)"
}
for c in "hole qcow2" "mixed qcow2" "odd qcow2" "hole qcow2 -o compression_type=zstd" \
         "mixed qcow2 -o cluster_size=4k" "hole vmdk -o subformat=streamOptimized" \
         "odd vmdk -o subformat=streamOptimized"; do
    set -- $c
    s=$1; shift; o="$*"
    rm -f q.img d.img
    qemu-img convert -f raw -c -S 0 -O "$@" $s.raw q.img || fail "qemu-img $s $o"
    ok "$DISKIMG" convert -f raw -c -S 0 -O "$@" $s.raw d.img
    within "$s -O $o" "$(stat -c %s d.img)" "$(stat -c %s q.img)"
    qemu-img compare -q -f raw $s.raw d.img || fail "$s -O $o: content differs"
    qemu-img check -q d.img || fail "$s -O $o: check"
done
# -n -c -S 0 into a fully allocated qcow2 image (qemu-img cannot compress
# over allocated clusters, so no comparison): the zeros are compressed too,
# the clusters they replace freed
qemu-img create -q -f qcow2 t.qcow2 12M || fail "create"
qemu-io -c 'write -P 0x44 0 12M' t.qcow2 >/dev/null || fail "qemu-io"
ok "$DISKIMG" convert -n -c -S 0 -O qcow2 hole.raw t.qcow2
qemu-img check -q t.qcow2 || fail "-n: check"
[ "$(alloc t.qcow2)" -lt $((4 << 20)) ] || fail "-n: $(alloc t.qcow2) bytes allocated for 10 MiB of zeros"
qemu-img convert -O raw t.qcow2 t.raw || fail "convert back"
cmp -n 10485760 hole.raw t.raw || fail "-n: content differs"
qemu-io -c 'read -P 0x44 10M 2M' t.qcow2 > rd.txt || fail "qemu-io read"
grep -q "verification failed" rd.txt && fail "-n: the range past the source changed"
exit 0
