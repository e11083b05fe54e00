#!/bin/bash
# Every write-queue backend (io_uring, pwrite, writer thread, and the
# DISKIMG_NO_URING fallback) writes the same output, buffered and O_DIRECT;
# faults that must be retried (EINTR, EAGAIN, short, on every call) are;
# a failed write or one that makes no progress is a message naming the
# output, exit 1, and no file left.
. "$(dirname "$0")/lib.sh"
gen -s 61 -u -m 1 -M 700K $((12 * 1024 * 1024 + 1234)) "$T/src.raw"
mkdir -p "$T/o"
noleft() { ls -A "$T/o" | grep -q . && fail "left behind: $(ls -A "$T/o")"; return 0; }

# where a ring can be made (no seccomp filter, io_uring not disabled), asking
# for io_uring must give io_uring, not a silent fallback
uring_name=io_uring
grep -Eq '^Seccomp:[[:space:]]+0' /proc/self/status &&
    [ "$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0)" = 0 ] || uring_name='(io_uring|pwrite)'

for b in uring pwrite thread; do
    name=$b; [ $b = uring ] && name=$uring_name
    for t in unsafe none; do
        ok env DISKIMG_IOQ=$b "$DISKIMG" convert -v -t $t "$T/src.raw" "$T/o/$b-$t.raw"
        grep -Eq "io backend $name," "$T/stderr.ok" ||
            fail "DISKIMG_IOQ=$b -t $t: $(grep 'io backend' "$T/stderr.ok")"
        cmp "$T/src.raw" "$T/o/$b-$t.raw" || fail "$b -t $t: content differs"
        rm -f "$T/o/$b-$t.raw"
    done
    for f in write:1+:EINTR,read:1+:EINTR write:1+:short write:1+:EAGAIN write:2+:short,write:1+:EINTR; do
        ok env DISKIMG_IOQ=$b DISKIMG_FAULT=$f "$DISKIMG" convert "$T/src.raw" "$T/o/f.raw"
        cmp "$T/src.raw" "$T/o/f.raw" || fail "$b under $f: content differs"
        rm -f "$T/o/f.raw"
    done
    expect_error "o/out.raw: write failed: Input/output error \(offset [0-9]+\)" \
        env DISKIMG_IOQ=$b DISKIMG_FAULT=write:3:EIO "$DISKIMG" convert "$T/src.raw" "$T/o/out.raw"
    noleft
    expect_error "o/out.raw: write failed: no progress" \
        env DISKIMG_IOQ=$b DISKIMG_FAULT=write:2:zero "$DISKIMG" convert "$T/src.raw" "$T/o/out.raw"
    noleft
    expect_error "o/out.raw: write failed: No space left on device" \
        env DISKIMG_IOQ=$b DISKIMG_FAULT=write:1+:ENOSPC "$DISKIMG" convert -t none "$T/src.raw" "$T/o/out.raw"
    noleft
done

# the forced fallback: pwrite whatever is asked, same output
for b in uring thread; do
    ok env DISKIMG_NO_URING=1 DISKIMG_IOQ=$b "$DISKIMG" convert -v "$T/src.raw" "$T/o/n.raw"
    grep -q "io backend pwrite," "$T/stderr.ok" || fail "DISKIMG_NO_URING=1: $(grep 'io backend' "$T/stderr.ok")"
    cmp "$T/src.raw" "$T/o/n.raw" || fail "DISKIMG_NO_URING=1: content differs"
    rm -f "$T/o/n.raw"
done
exit 0
