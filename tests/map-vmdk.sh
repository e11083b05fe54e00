#!/bin/bash
# map and compare on single-file vmdk images: the real-world samples (VMware
# hosted sparse, streamOptimized with and without markers, a 16 GiB
# streamOptimized iotest image, images from old qemu) and images qemu-img
# makes (grains allocated out of order), against qemu-img map and qemu-img
# compare with their raw conversions.  Descriptor files with separate extent
# files (sparse and flat): map-vmdk-extent-files.sh.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
S=$SHARED/samples/vmdk
[ -d "$S" ] || skip "no samples at $S"

qemu-img create -q -f vmdk "$T/probe.vmdk" 1M
# a vmdk image qemu-img made must be readable: a failure here is a failure
"$DISKIMG" map "$T/probe.vmdk" > /dev/null 2> "$T/probe.err" ||
    { cat "$T/probe.err" >&2; fail "map cannot read a vmdk image qemu-img made"; }

same_as_qemu() {   # same_as_qemu map|compare ARGS...
    local qrc=0 drc=0 cmd=$1; shift
    qemu-img $cmd "$@" > "$T/q.out" 2>/dev/null || qrc=$?
    "$DISKIMG" $cmd "$@" > "$T/d.out" 2>"$T/d.err" || drc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: $cmd $*"; }
    [ $qrc = $drc ] || { cat "$T/d.err"; fail "$cmd $*: exit $drc, qemu-img $qrc"; }
    diff "$T/q.out" "$T/d.out" > "$T/diff" || { head -20 "$T/diff"; fail "$cmd $*: output differs from qemu-img"; }
}

bzcat "$SHARED/samples/qemu-iotests/iotest-version3.vmdk.bz2" > "$T/v3.vmdk" || fail "bzcat"
qemu-img create -q -f vmdk "$T/frag.vmdk" 8M
qemu-io -c "write -P 1 1M 64k" -c "write -P 2 0 64k" -c "write -P 3 64k 64k" -c "write -P 4 6M 192k" \
    -c "write -P 5 4M 4k" "$T/frag.vmdk" > /dev/null || fail "qemu-io"
# grains of adjacent guest ranges allocated in reverse order: separate
# ranges, each with its own offset
qemu-io -c "write -P 8 3M 64k" -c "write -P 9 3008k 64k" -c "write -P 10 2944k 64k" \
    "$T/frag.vmdk" > /dev/null || fail "qemu-io"
qemu-img convert -O vmdk -o subformat=streamOptimized "$T/frag.vmdk" "$T/so.vmdk"

(cd "$S" && for img in vmdk-rs/monolithicSparse.vmdk vmdk-rs/0.vmdk vmdk-rs/streamOptimized.vmdk \
        vmdk-rs/streamOptimizedWithMarkers.vmdk \
        SecurityRonin-vmdk/plaso_image.vmdk SecurityRonin-vmdk/dfvfs_ext2.vmdk; do
    same_as_qemu map --output=json $img
    # streamOptimized grains are compressed: both refuse the human form
    same_as_qemu map $img
    qemu-img convert -O raw $img "$T/flat.raw"
    same_as_qemu compare $img "$T/flat.raw"
    same_as_qemu compare -s "$T/flat.raw" $img
done) || exit 1
for img in v3 frag so; do
    same_as_qemu map --output=json "$T/$img.vmdk"
    same_as_qemu map "$T/$img.vmdk"
    qemu-img convert -O raw "$T/$img.vmdk" "$T/$img.raw"
    same_as_qemu compare "$T/$img.vmdk" "$T/$img.raw"
    same_as_qemu compare -s "$T/$img.vmdk" "$T/$img.raw"
done
same_as_qemu compare "$T/frag.vmdk" "$T/so.vmdk"
same_as_qemu compare -s "$T/so.vmdk" "$T/frag.vmdk"
# one byte off in the 16 GiB image's raw copy, past most of its holes
printf 'Z' | dd of="$T/v3.raw" bs=1 seek=$((16 * 1024 * 1024 * 1024 - 5000)) conv=notrunc status=none
same_as_qemu compare "$T/v3.vmdk" "$T/v3.raw"
grep -q "Content mismatch" "$T/d.out" || fail "changed byte not found"

# a fuzzed header with an absurd capacity: refused, no huge allocation
bzcat "$SHARED/samples/qemu-iotests/afl9.vmdk.bz2" > "$T/afl9.vmdk" || fail "bzcat"
expect_error "afl9.vmdk" "$DISKIMG" map "$T/afl9.vmdk"
rc=0; "$DISKIMG" compare "$T/afl9.vmdk" "$T/v3.vmdk" > /dev/null 2> "$T/err" || rc=$?
[ $rc = 2 ] && grep -q "afl9.vmdk" "$T/err" || fail "compare with a bad image: exit $rc $(cat "$T/err")"
exit 0
