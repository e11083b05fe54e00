#!/bin/bash
# qcow2 to a pipe: `convert -O qcow2 SRC - | cat > out` (two passes over the
# source, every byte written in order).  Each output passes qemu-img check
# (no errors, no leaks) and compares identical with the source, across
# cluster sizes, refcount widths, compat, extended L2, compression (zlib,
# zstd), odd sizes, -S 0, a qcow2 source, an empty disk and a 100 GiB sparse
# disk holding a few MiB.  Sources that are pipes are refused.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || fail "cd"

# piped SRC OUT ARGS...: convert through a pipe, then check and compare
piped() {
    local src=$1 out=$2; shift 2
    "$DISKIMG" convert "$@" -O qcow2 "$src" - 2> err | cat > "$out"
    local rc=${PIPESTATUS[0]}
    grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "sanitizer: $*"; }
    [ "$rc" = 0 ] || { cat err; fail "convert $* $src - exits $rc"; }
    qemu-img check -q "$out" || fail "qemu-img check $out ($*)"
    qemu-img compare -q "$src" "$out" || fail "$out ($*) differs from $src"
}

gen -s 11 -a 60 -m 2K -M 400K $((6 * 1024 * 1024)) src.raw
gen -s 12 -u -m 1 -M 200K $((3 * 1024 * 1024 + 333)) odd.raw
for o in "" cluster_size=512 cluster_size=4k cluster_size=2M refcount_bits=1 \
         refcount_bits=64 compat=0.10 extended_l2=on "cluster_size=512,refcount_bits=2"; do
    piped odd.raw b.qcow2 ${o:+-o "$o"}
    piped odd.raw c.qcow2 -c ${o:+-o "$o"}
done
piped odd.raw z.qcow2 -c -o compression_type=zstd,cluster_size=16k
piped odd.raw z.qcow2 -c -o compression_type=zstd,refcount_bits=1
piped src.raw full.qcow2 -S 0
piped src.raw w.qcow2 -W -m 4

# the same bytes as a file output of the same options (same allocation)
"$DISKIMG" convert -O qcow2 src.raw file.qcow2 || fail "file output"
piped src.raw pipe.qcow2
[ "$(stat -c %s pipe.qcow2)" -le $(( $(stat -c %s file.qcow2) + 65536 )) ] ||
    fail "pipe output is larger than file output"
cmp <("$DISKIMG" info --output=json pipe.qcow2 | grep -v '"filename"\|actual-size') \
    <("$DISKIMG" info --output=json file.qcow2 | grep -v '"filename"\|actual-size') ||
    fail "info differs between pipe and file output"

# a qcow2 source with compressed, zero and subcluster-allocated clusters
qemu-img create -q -f qcow2 -o extended_l2=on,cluster_size=64k xl.qcow2 4M
qemu-io -c 'write -P 1 3k 5k' -c 'write -P 2 1M 300k' -c 'write -z 2M 64k' xl.qcow2 >/dev/null
qemu-img convert -c -O qcow2 xl.qcow2 comp.qcow2
piped comp.qcow2 d.qcow2
piped xl.qcow2 e.qcow2 -c -o cluster_size=8k

# empty disks
: > empty.raw
piped empty.raw f.qcow2
truncate -s 5M holes.raw
piped holes.raw g.qcow2 -c

# 100 GiB of holes with a few MiB of data: block status, no reading of holes
truncate -s 100G big.raw
head -c 3M /dev/urandom | dd of=big.raw bs=1M seek=50000 conv=notrunc status=none
printf 'the end' | dd of=big.raw bs=1 seek=$((100 * 1024 * 1024 * 1024 - 7)) \
    conv=notrunc status=none
start=$(date +%s%N)
piped big.raw big.qcow2
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$(stat -c %s big.qcow2)" -lt $((8 * 1024 * 1024)) ] || fail "100 GiB sparse: output too large"
echo "100 GiB sparse source through a pipe, checked and compared: $ms ms"
piped big.raw bigc.qcow2 -c -o cluster_size=2M

# refused: a source that is a pipe (it would have to be read twice), options
# that cannot be streamed
refused() {
    local re=$1; shift
    local rc=0
    bash -c '"$@" 2> err | cat > /dev/null; exit ${PIPESTATUS[0]}' sh "$@" || rc=$?
    [ $rc = 1 ] || { cat err; fail "expected exit 1, got $rc: $*"; }
    grep -Eq -- "$re" err || { cat err; fail "stderr does not match '$re': $*"; }
}
refused "seekable|not known in advance" sh -c 'cat src.raw | "$0" convert -f raw -O qcow2 - -' "$DISKIMG"
refused "backing file is not supported" "$DISKIMG" convert -O qcow2 -B src.raw src.raw -
refused "preallocation is not supported" "$DISKIMG" convert -O qcow2 \
    -o preallocation=metadata src.raw -
# stdout closed early: an error, not a hang or a crash
"$DISKIMG" convert -O qcow2 src.raw - 2> err | head -c 1000 > /dev/null
rc=${PIPESTATUS[0]}
[ "$rc" = 1 ] || [ "$rc" = 141 ] || fail "closed stdout: exit $rc"
exit 0
