#!/bin/bash
# Bad input and bad output places: a message naming the file, exit 1, and
# nothing left at the target (not even a temporary file).
. "$(dirname "$0")/lib.sh"
gen -s 5 -m 64K -M 256K 4M "$T/src.raw"
noleft() { ls -A "$T/$1" 2>/dev/null | grep -q . && fail "left behind in $1: $(ls -A "$T/$1")"; return 0; }
mkdir -p "$T/o"

expect_error "missing.raw: cannot open: no such file" "$DISKIMG" convert "$T/missing.raw" "$T/o/out.raw"
noleft o
mkdir "$T/adir"
expect_error "adir: is a directory" "$DISKIMG" convert "$T/adir" "$T/o/out.raw"
noleft o
expect_error "out.raw: .*does not exist" "$DISKIMG" convert -n "$T/src.raw" "$T/o/out.raw"
expect_error "is a directory" "$DISKIMG" convert "$T/src.raw" "$T/adir"
expect_error "output is also an input" "$DISKIMG" convert "$T/src.raw" "$T/src.raw"
expect_error "output is also an input" "$DISKIMG" convert -n "$T/src.raw" "$T/src.raw"
cmp "$T/src.raw" <("$DISKIMG" convert "$T/src.raw" - ) || fail "source changed"

# unreadable input, output folder not writable (as an unprivileged user)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
    chmod 755 "$T"
    cp "$T/src.raw" "$T/secret.raw"; chmod 600 "$T/secret.raw"
    mkdir -p "$T/ro" "$T/w"; chmod 755 "$T/ro"; chmod 777 "$T/w"
    expect_error "secret.raw: cannot open: permission denied" asnobody "$DISKIMG" convert "$T/secret.raw" "$T/w/out.raw"
    noleft w
    chmod 644 "$T/src.raw"
    expect_error "ro/out.raw: cannot create the output: permission denied" asnobody "$DISKIMG" convert "$T/src.raw" "$T/ro/out.raw"
    noleft ro
fi

# read and write failures injected in the I/O layer
expect_error "src.raw: read failed: Input/output error \(offset [0-9]+\)" \
    env DISKIMG_FAULT=read:2:EIO "$DISKIMG" convert "$T/src.raw" "$T/o/out.raw"
noleft o
expect_error "out.raw: write failed: No space left on device \(offset [0-9]+\)" \
    env DISKIMG_FAULT=write:2:ENOSPC "$DISKIMG" convert "$T/src.raw" "$T/o/out.raw"
noleft o
expect_error "fsync failed" env DISKIMG_FAULT=sync:1:EIO "$DISKIMG" convert "$T/src.raw" "$T/o/out.raw"
noleft o
# EINTR and short transfers are retried, not errors
ok env DISKIMG_FAULT=read:1+:short,write:1+:short "$DISKIMG" convert "$T/src.raw" "$T/o/a.raw"
cmp "$T/src.raw" "$T/o/a.raw" || fail "short transfers: content differs"
ok env DISKIMG_FAULT=read:2:EINTR,read:4:EINTR,write:2:EINTR "$DISKIMG" convert "$T/src.raw" "$T/o/b.raw"
cmp "$T/src.raw" "$T/o/b.raw" || fail "EINTR: content differs"
rm -f "$T/o/a.raw" "$T/o/b.raw"

# a real full file system
mkdir -p "$T/mnt"
if mount -t tmpfs -o size=256K tmpfs "$T/mnt" 2>/dev/null; then
    trap 'umount "$T/mnt"' EXIT
    expect_error "out.raw: write failed: No space left on device" "$DISKIMG" convert "$T/src.raw" "$T/mnt/out.raw"
    ls -A "$T/mnt" | grep -q . && fail "left on the full file system: $(ls -A "$T/mnt")"
fi
exit 0
