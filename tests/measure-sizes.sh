#!/bin/bash
# asan: skip (pure arithmetic, 300 process runs; measure-images covers ASan)
# diskimg measure --size against qemu-img measure: the same numbers (human
# and JSON output, byte for byte) and the same exit status, for raw and
# qcow2 over many sizes and the -o options that change the arithmetic.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || fail "cd"

# same ARGS...: stdout and exit status of both tools must be equal
n=0
same() {
    local rc=0 qrc=0
    "$DISKIMG" measure "$@" > mine 2> mine.err || rc=$?
    qemu-img measure "$@" > ref 2> ref.err || qrc=$?
    grep -q "AddressSanitizer\|runtime error" mine.err && fail "sanitizer: measure $*"
    [ $rc = $qrc ] || { cat mine.err ref.err; fail "measure $*: exit $rc, qemu-img $qrc"; }
    cmp -s mine ref || { diff mine ref; fail "measure $*: output differs from qemu-img's"; }
    n=$((n + 1))
}

sizes="0 1 511 512 1000 65535 65536 1234567 1G 100G 2T"
for s in $sizes; do
    same --size "$s"
    same -O raw --size "$s" --output=json
done
optsets=(
    ""
    "cluster_size=512" "cluster_size=4k" "cluster_size=2M"
    "refcount_bits=1" "refcount_bits=8" "refcount_bits=64"
    "cluster_size=512,refcount_bits=64"
    "extended_l2=on" "extended_l2=on,cluster_size=2M" "extended_l2=on,cluster_size=16k"
    "preallocation=metadata" "preallocation=falloc" "preallocation=full"
    "compat=0.10" "lazy_refcounts=on" "compression_type=zstd" "backing_file=x.qcow2"
)
for o in "${optsets[@]}"; do
    for s in 0 1000 1234567 100G 2T; do
        if [ -n "$o" ]; then same -O qcow2 -o "$o" --size "$s"; else same -O qcow2 --size "$s"; fi
    done
    same -O qcow2 ${o:+-o "$o"} --size 7G --output=json
done
# sizes around L1 and refcount block boundaries
for s in 536870912 536870913 4294967296 $(( (1 << 41) + 512 )) 16P 1E; do
    same -O qcow2 --size "$s"
    same -O qcow2 -o cluster_size=1k --size "$s"
done
# errors: exit 1 for both (messages are diskimg's own)
for args in "-O qcow2 -o cluster_size=3k --size 1G" "-O qcow2 -o foo=1 --size 1G" \
            "-O raw -o cluster_size=4k --size 1G" "-O qcow2 --size 12x" \
            "-O qcow2 --size -5" "-O qcow2 -o compat=0.10,refcount_bits=8 --size 1G" \
            "-O qcow2 -o extended_l2=on,cluster_size=4k --size 1G" "-O bogus --size 1G" \
            "-O qcow2 -f qcow2 --size 1G" "-O qcow2"; do
    # shellcheck disable=SC2086
    same $args
done
expect_error "Either --size N or one filename" "$DISKIMG" measure -O qcow2
expect_error "cannot be used together" "$DISKIMG" measure --size 1G x.raw
expect_error "Invalid parameter 'foo'" "$DISKIMG" measure -O qcow2 -o foo=1 --size 1G
expect_error "encrypted images are not supported" "$DISKIMG" measure -O qcow2 -o encryption=on --size 1G
expect_error "too large" "$DISKIMG" measure -O qcow2 --size 1E
"$DISKIMG" measure -O qcow2 -o help | grep -q cluster_size || fail "-o help"
echo "$n comparisons"
exit 0
