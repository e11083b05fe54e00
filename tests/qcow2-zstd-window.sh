#!/bin/bash
# A zstd compressed cluster whose frame asks for a 128 MiB window (and
# declares no content size) is refused with a message naming the window,
# and costs no 128 MiB per reader thread: each decoder accepts windows up
# to the cluster size only (issue 10 item 3).  qemu reads the same frame
# (its decoders accept windows up to 2^27), which shows it is well formed;
# frames qemu writes, of every cluster size, still read.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
qemu-img create -q -f qcow2 -o compression_type=zstd,cluster_size=64k z.qcow2 1M
qemu-io -c 'write -c -P 0x11 0 64k' -c 'write -c -P 0x22 64k 64k' z.qcow2 >/dev/null
readback z.qcow2

# frame: magic, no flags, window descriptor, one last RLE block of 64 KiB of 0x5a
# wd: exponent << 3 | mantissa, 2^(10 + exponent) * (1 + mantissa / 8) bytes
frame() {
    local wd=$1 bh=$(( 1 | (1 << 1) | (65536 << 3) ))
    printf "28b52ffd00%02x%02x%02x%02x5a" "$wd" $((bh & 255)) $(((bh >> 8) & 255)) $((bh >> 16))
}
L2=$(( $(peek64 z.qcow2 "$(peek64 z.qcow2 40)") & 0x00fffffffffffe00 ))
# bomb: each of 16 guest clusters names its own frame asking for 2^27
cp z.qcow2 bomb.qcow2
end=$(( ($(stat -c %s bomb.qcow2) + 511) / 512 * 512 ))
for i in $(seq 0 15); do
    poke bomb.qcow2 $((end + i * 512)) "$(frame $((17 << 3)))"
    poke bomb.qcow2 $((L2 + i * 8)) "$(be64 $(( (1 << 62) | (end + i * 512) )))"
done
truncate -s $((end + 16 * 512)) bomb.qcow2
qemu-img convert -O raw bomb.qcow2 ref.raw || fail "qemu-img does not read the frames"
[ "$(od -A n -t x1 -N 1 ref.raw | tr -d ' ')" = 5a ] || fail "qemu-img reads other bytes"

# the refusal names the window, also with many reader threads; in the plain
# build under an address-space limit that 16 decoders of 128 MiB would pass
lim=""
asan_build || lim="ulimit -v 1200000;"
want="compressed cluster at host offset $end \(guest offset 0\): zstd frame asks for a window larger than the cluster size \(65536 bytes allowed\): it asks for 134217728 bytes"
expect_error "$want" bash -c "$lim exec \"\$@\"" sh "$DISKIMG" convert -m 16 -O raw bomb.qcow2 out.raw
[ -e out.raw ] && fail "output left behind"
# compare: a read failure is exit 4
rc=0
"$DISKIMG" compare bomb.qcow2 ref.raw >cmp.out 2>cmp.err || rc=$?
[ $rc = 4 ] && grep -q "window larger than the cluster size" cmp.err ||
    { cat cmp.out cmp.err; fail "compare: exit $rc"; }
# --salvage: zeros where the frames are, a warning naming the window
bash -c "$lim exec \"\$@\"" sh "$DISKIMG" convert --salvage -m 16 -O raw bomb.qcow2 salv.raw \
    2>salv.err || { cat salv.err >&2; fail "--salvage failed"; }
grep -q "window larger than the cluster size" salv.err || { cat salv.err >&2; fail "no warning"; }
cmp -n $((16 * 65536)) salv.raw /dev/zero || fail "--salvage: not zeros where the frames are"

# a window of exactly the cluster size reads, one step above it does not
cp z.qcow2 edge.qcow2
poke edge.qcow2 "$end" "$(frame $((6 << 3)))"
poke edge.qcow2 "$L2" "$(be64 $(( (1 << 62) | end )))"
truncate -s $((end + 512)) edge.qcow2
readback edge.qcow2
poke edge.qcow2 "$end" "$(frame $((6 << 3 | 1)))"
expect_error "asks for 73728 bytes" "$DISKIMG" convert -O raw edge.qcow2 out.raw

# qemu's own frames at every cluster size read under the bound
gen -s 3 -a 60 -m 512 -M 64K 3M src.raw
for cs in 512 4K 64K 2M; do
    qemu-img convert -c -O qcow2 -o compression_type=zstd,cluster_size=$cs src.raw c$cs.qcow2
    readback c$cs.qcow2
done
exit 0
