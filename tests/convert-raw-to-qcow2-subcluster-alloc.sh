#!/bin/bash
# qcow2 output with extended L2 entries or preallocation writes only what
# holds data: 64 MiB holding 4 KiB every 2 MiB, with 2 MiB clusters, used
# to allocate 74 MB in every mode (each touched cluster written whole, its
# zero padding included) where qemu-img allocates 10 MB (extended L2: the
# touched 64 KiB subclusters) and 8 MB (metadata preallocation: the data,
# holes elsewhere).  Allocated bytes must stay within 25% of qemu-img's (or
# below); qemu-img check clean, compare identical, and for extended L2 the
# same map as qemu-img's (which subclusters are allocated).
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || exit 1
truncate -s 64M s.raw
perl -e 'open(F, "+<", "s.raw") or die; for my $i (0 .. 31) {
    seek(F, $i * 2097152 + ($i % 3) * 70000, 0);
    print F pack("N", $i + 1) x 1024 }' || fail "making the source"
# an odd size: the last subcluster is short
head -c 3000000 s.raw > odd.raw
truncate -s 3000100 odd.raw

within() {          # WHAT OURS QEMUS
    [ "$2" -le $(($3 * 5 / 4 + 65536)) ] ||
        fail "$1: $2 bytes allocated, qemu-img $3 (more than 25% over)"
}
# which ranges are allocated (present) and hold data: without host offsets
# (layouts differ) and without the zero flag of data ranges (holes in data
# clusters: qemu-img's own output varies there from run to run), runs merged
map_of() {
    qemu-img map --output=json "$1" | perl -ne '
        next unless /"start": (\d+), "length": (\d+), "depth": (\d+), "present": (\w+), "zero": \w+, "data": (\w+)/;
        my $k = "$3 $4 $5";
        if (defined $pk && $k eq $pk && $ps + $pl == $1) { $pl += $2; next }
        print "$ps $pl $pk\n" if defined $pk;
        ($ps, $pl, $pk) = ($1, $2, $k);
        END { print "$ps $pl $pk\n" if defined $pk }'
}
for c in "s cluster_size=2M,extended_l2=on" \
         "s cluster_size=2M,preallocation=metadata" \
         "s cluster_size=2M,extended_l2=on,preallocation=metadata" \
         "s cluster_size=512K,extended_l2=on,preallocation=falloc" \
         "s extended_l2=on" \
         "odd extended_l2=on,cluster_size=32K" \
         "odd preallocation=metadata,cluster_size=4K"; do
    set -- $c
    rm -f q.qcow2 d.qcow2
    qemu-img convert -f raw -O qcow2 -o "$2" "$1.raw" q.qcow2 || fail "qemu-img -o $2"
    ok "$DISKIMG" convert -f raw -O qcow2 -o "$2" "$1.raw" d.qcow2
    qemu-img check -q d.qcow2 || fail "$1 -o $2: check"
    qemu-img compare -q q.qcow2 d.qcow2 || fail "$1 -o $2: differs from qemu-img's"
    within "$1 -o $2" "$(alloc d.qcow2)" "$(alloc q.qcow2)"
    case $2 in *extended_l2=on*)
        [ "$(map_of d.qcow2)" = "$(map_of q.qcow2)" ] || fail "$1 -o $2: map differs" ;;
    esac
done

# over a backing file (-B): subclusters equal to it stay unallocated, zeroed
# ones get the zero bits; content right, and never more than qemu-img's
head -c 8M /dev/urandom > base.raw
cp base.raw top.raw
perl -e 'open(F, "+<", "top.raw") or die; for my $i (0 .. 40) {
    seek(F, $i * 200000, 0); print F ($i % 2 ? "\0" : "x") x 5000 }' || fail "top"
for o in "extended_l2=on" "extended_l2=on,cluster_size=2M" \
         "extended_l2=on,preallocation=metadata,cluster_size=128K"; do
    rm -f q.qcow2 d.qcow2
    qemu-img convert -f raw -B base.raw -F raw -O qcow2 -o "$o" top.raw q.qcow2 ||
        fail "qemu-img -B -o $o"
    ok "$DISKIMG" convert -f raw -B base.raw -F raw -O qcow2 -o "$o" top.raw d.qcow2
    qemu-img check -q d.qcow2 || fail "-B -o $o: check"
    qemu-img compare -q -f raw top.raw d.qcow2 || fail "-B -o $o: content differs"
    within "-B -o $o" "$(alloc d.qcow2)" "$(alloc q.qcow2)"
done
exit 0
