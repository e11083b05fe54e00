#!/bin/bash
# Replacing a vmdk image of several files (a descriptor and extent files)
# by another is all or nothing.  Every step of the commit (each link,
# rename, renameat2, unlink and fsync the main thread makes at the end) is
# failed in turn with EIO (strace -e inject):
#   - a failure before the new descriptor is in place and synced: exit 1,
#     the old image whole (qemu-img compare with its source) and exactly
#     the old files in the folder, no temporary file left;
#   - a failed removal of an old file after the commit: exit 0, the new
#     image whole, a warning naming the file left behind;
# also on a file system without hard links or RENAME_NOREPLACE (link EPERM,
# renameat2 EINVAL injected: the fallbacks).  Then SIGKILL before each step,
# and the recovery rule of the man page must give the old or the new image.
# Old extents the new image no longer names are gone after a commit.
. "$(dirname "$0")/lib.sh"
need qemu-img
need strace
# LeakSanitizer cannot run under ptrace
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mkdir -p "$T/d" "$T/keep"
D=$T/d

# sources: 5 MiB (two contents), 2.2 GiB sparse (two 2 GiB extents when
# split)
truncate -s 5M "$T/small.raw"
qemu-io -f raw -c 'write -P 0xa1 0 1M' "$T/small.raw" >/dev/null
truncate -s 5M "$T/small2.raw"
qemu-io -f raw -c 'write -P 0xa2 1M 1M' "$T/small2.raw" >/dev/null
truncate -s 2200M "$T/big.raw"
qemu-io -f raw -c 'write -P 0xb1 4k 64k' -c 'write -P 0xb2 2100M 64k' "$T/big.raw" >/dev/null

listing() { (cd "$D" && LC_ALL=C ls -A); }

# setup OLDSRC OLDSUB: the old image at $D/out.vmdk, saved in $T/keep
setup() {
    rm -rf "$D" "$T/keep"; mkdir -p "$D" "$T/keep"
    "$DISKIMG" convert -O vmdk -o subformat="$2" "$1" "$D/out.vmdk" || fail "setup $2"
    cp -a --sparse=always "$D"/. "$T/keep/"
    old_list=$(listing)
}
# the old files again (hard links: the commit never writes into an old
# file, and a change would show in the comparison with its source anyway)
restore() {
    rm -rf "$D"; mkdir -p "$D"
    cp -al "$T/keep"/. "$D/"
}

# which calls of each syscall a clean commit makes (main thread only: no
# -f): $T/trace; the fsyncs of the folder (not of the data) in $dir_fsyncs
trace_clean() {
    restore
    strace -o "$T/trace" -y -e trace=link,rename,renameat2,fsync,unlink "$@" \
        "$DISKIMG" convert -O vmdk -o subformat="$newsub" "$newsrc" "$D/out.vmdk" \
        2>"$T/err" || { cat "$T/err" >&2; fail "clean run"; }
    dir_fsyncs=$(grep '^fsync(' "$T/trace" | grep -n "<$D>" | cut -d: -f1)
    [ -n "$dir_fsyncs" ] || fail "no fsync of the folder in a durable commit"
}
calls() {
    if [ "$1" = fsync ]; then echo $dir_fsyncs; else seq 1 "$(grep -c "^$1(" "$T/trace")"; fi
}

# run SC N [STRACE ARGS...]: the conversion with EIO injected into the Nth call of SC
run_injected() {
    local sc=$1 n=$2; shift 2
    restore
    rc=0
    strace -o /dev/null "$@" -e inject="$sc":error=EIO:when="$n" \
        "$DISKIMG" convert -O vmdk -o subformat="$newsub" "$newsrc" "$D/out.vmdk" \
        2>"$T/err" || rc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/err" && { cat "$T/err" >&2; fail "sanitizer"; }
    return 0
}

old_whole() {
    qemu-img compare -q "$oldsrc" "$D/out.vmdk" || fail "$1: the old image is not whole"
    [ "$(listing)" = "$old_list" ] || fail "$1: files differ from the old image's: $(listing)"
}
new_whole() {
    qemu-img compare -q "$newsrc" "$D/out.vmdk" || fail "$1: the new image is not whole"
}

# scenario "SYSCALLS" OLDSRC OLDSUB NEWSRC NEWSUB [STRACE ARGS...]
scenario() {
    local sweep=$1
    oldsrc=$2 oldsub=$3 newsrc=$4 newsub=$5; shift 5
    local tag="$oldsub -> $newsub${*:+ ($*)}" sc n i
    setup "$oldsrc" "$oldsub"
    trace_clean "$@"
    for sc in $sweep; do
        n=0
        for i in $(calls $sc); do
            n=$((n + 1))
            run_injected "$sc" "$i" "$@"
            if [ $sc = unlink ]; then
                # only the old files' second names are unlinked, after the commit
                [ $rc = 0 ] || { cat "$T/err" >&2; fail "$tag: unlink #$i: exit $rc"; }
                new_whole "$tag: unlink #$i"
                left=$(grep -o '[^ ]*\.diskimg-old-[A-Za-z0-9]*' "$T/err" | head -n 1)
                [ -n "$left" ] && [ -e "$left" ] ||
                    { cat "$T/err" >&2; fail "$tag: unlink #$i: no warning naming the file left"; }
                [ "$(listing | grep -c diskimg-)" = 1 ] || fail "$tag: unlink #$i: $(listing)"
            else
                [ $rc = 1 ] || { cat "$T/err" >&2; fail "$tag: $sc #$i: exit $rc"; }
                grep -q "Input/output error" "$T/err" ||
                    { cat "$T/err" >&2; fail "$tag: $sc #$i: no message"; }
                old_whole "$tag: $sc #$i"
            fi
        done
        echo "$tag: $sc: $n calls, each failed in turn"
    done
    # a clean run: the new image, and no old extent left behind
    restore
    ok "$DISKIMG" convert -O vmdk -o subformat="$newsub" "$newsrc" "$D/out.vmdk"
    new_whole "$tag: clean"
    for f in $(listing); do
        case $f in
            out.vmdk) ;;
            out-*.vmdk) grep -q "\"$f\"" "$D/out.vmdk" || fail "$tag: $f left behind" ;;
            *) fail "$tag: $f left in the folder" ;;
        esac
    done
}

# the same names; new extents and the old extent dropped; all old extents
# dropped by a new image of one file; and without hard links and
# RENAME_NOREPLACE, new extents replacing old ones and one dropped (each
# sweeps the calls it makes that the ones before did not)
scenario "link rename fsync unlink" \
    "$T/small.raw" monolithicFlat "$T/small2.raw" monolithicFlat
scenario "link rename renameat2 unlink" \
    "$T/small.raw" monolithicFlat "$T/big.raw" twoGbMaxExtentFlat
scenario "rename renameat2" \
    "$T/big.raw" twoGbMaxExtentSparse "$T/small.raw" monolithicSparse
scenario "rename" \
    "$T/big.raw" twoGbMaxExtentFlat "$T/small.raw" twoGbMaxExtentFlat \
    -e inject=link:error=EPERM -e inject=renameat2:error=EINVAL

# SIGKILL before each step, then the recovery rule of the man page:
# if .out.vmdk.diskimg-old-* is there, move every .X.diskimg-old-* back to
# X; otherwise delete them; delete .X.diskimg-XXXXXX in both cases
recover() {
    local f base
    if ls -A "$D" | grep -q '^\.out\.vmdk\.diskimg-old-'; then
        for f in "$D"/.*.diskimg-old-*; do
            base=${f##*/}; base=${base#.}; base=${base%.diskimg-old-*}
            # a second hard link of a file still at its name: just the link goes
            if [ "$f" -ef "$D/$base" ]; then rm "$f"; else mv "$f" "$D/$base"; fi
        done
    else
        rm -f "$D"/.*.diskimg-old-*
    fi
    rm -f "$D"/.*.diskimg-??????
}
oldsrc=$T/big.raw newsrc=$T/small.raw newsub=twoGbMaxExtentFlat
setup "$oldsrc" twoGbMaxExtentSparse
trace_clean
for sc in link rename renameat2 unlink; do
    n=0
    for i in $(calls $sc); do
        n=$((n + 1))
        restore
        # (a shell between: the script's would report the kill)
        sh -c 'strace -o /dev/null -e inject="$1":signal=KILL:when="$2" "$3" convert \
            -O vmdk -o subformat="$4" "$5" "$6"; echo $? > "$7"' sh "$sc" "$i" "$DISKIMG" \
            "$newsub" "$newsrc" "$D/out.vmdk" "$T/rc" 2>/dev/null
        [ "$(cat "$T/rc")" = 137 ] || fail "SIGKILL before $sc #$i: exit $(cat "$T/rc")"
        recover
        if qemu-img compare -q "$oldsrc" "$D/out.vmdk" 2>/dev/null; then
            # the old image, and its files (the new image's new extents may stay)
            for f in $old_list; do [ -e "$D/$f" ] || fail "SIGKILL before $sc #$i: $f lost"; done
        else
            new_whole "SIGKILL before $sc #$i, recovered"
        fi
    done
    echo "SIGKILL before each $sc ($n): recovered"
done
exit 0
