#!/bin/bash
# A real full file system: each conversion writes into a small tmpfs that
# cannot hold its output (a quarter, half, and all but a few pages of what
# it needs: the last case fails while writing metadata at the end).  Each
# time: exit 1, "No space left on device" naming the output, nothing left on
# the tmpfs, the input unchanged.  Skipped where mount is not allowed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault/lib.sh"
mkdir -p "$T/in" "$T/ok" "$T/mnt"
mount -t tmpfs -o size=64k tmpfs "$T/mnt" 2>/dev/null || skip "cannot mount a tmpfs here"
umount "$T/mnt"
trap 'umount "$T/mnt" 2>/dev/null' EXIT
gen -s 13 -m 64K -M 512K 4M "$T/in/src.raw"
qemu-img convert -f raw -O qcow2 "$T/in/src.raw" "$T/in/src.qcow2"
qemu-img convert -f raw -O qcow2 -c "$T/in/src.raw" "$T/in/srcz.qcow2"
qemu-img convert -f raw -O vmdk -o subformat=streamOptimized "$T/in/src.raw" "$T/in/src.vmdk"
pairs="src.raw:raw src.raw:qcow2 src.qcow2:raw srcz.qcow2:qcow2 src.raw:qcow2:-c"
ok "$DISKIMG" info "$T/in/src.vmdk" >/dev/null
pairs="$pairs src.vmdk:qcow2 src.vmdk:raw"
checksum_inputs

for p in $pairs; do
    IFS=: read -r src fmt opt <<<"$p"
    # what the output needs on a file system (allocated blocks)
    rm -f "$T/ok/out"
    "$DISKIMG" convert -O "$fmt" $opt "$T/in/$src" "$T/ok/out" || fail "$p: clean conversion failed"
    need_kb=$(( $(alloc "$T/ok/out") / 1024 ))
    for kb in $((need_kb / 4)) $((need_kb / 2)) $((need_kb - 8)); do
        [ $kb -ge 4 ] || continue
        mount -t tmpfs -o size=${kb}k tmpfs "$T/mnt" || fail "mount"
        must_fail "$p into ${kb}K of ${need_kb}K" "out\.$fmt(\.diskimg-[A-Za-z0-9]+)?: (write|fsync) failed: No space left on device" \
            -- "$DISKIMG" convert -O "$fmt" $opt "$T/in/$src" "$T/mnt/out.$fmt"
        empty_dir "$T/mnt" "$p into ${kb}K"
        umount "$T/mnt"
    done
    # and with room enough it works
    mount -t tmpfs -o size=$((need_kb + 64))k tmpfs "$T/mnt" || fail "mount"
    "$DISKIMG" convert -O "$fmt" $opt "$T/in/$src" "$T/mnt/out.$fmt" || fail "$p: with ${need_kb}K + 64K free"
    same_content "$T/in/$src" "$T/mnt/out.$fmt"
    umount "$T/mnt"
    echo "$p: needs ${need_kb}K, fails cleanly with less"
done
unchanged full-fs
exit 0
