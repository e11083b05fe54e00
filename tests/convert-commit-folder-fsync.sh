#!/bin/bash
# A durable commit syncs the target's folder after the rename, and a failed
# folder fsync is an error: exit 1 with a message, the rename undone (the
# old target back, or no target if there was none), no temporary file.
# -t unsafe syncs nothing.  (EIO injected with strace into the fsyncs of
# the folder, told from the data's by strace -y.)
. "$(dirname "$0")/lib.sh"
need qemu-img
need strace
# LeakSanitizer cannot run under ptrace
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mkdir -p "$T/d"
D=$T/d
gen -s 4 -m 4K -M 256K 2M "$T/old.raw"
gen -s 5 -m 4K -M 256K 2M "$T/new.raw"

# the indexes among the main thread's fsyncs of those on the folder
dir_fsyncs() {
    strace -o "$T/trace" -y -e trace=fsync "$@" 2>"$T/err" || { cat "$T/err" >&2; fail "clean: $*"; }
    grep '^fsync(' "$T/trace" | grep -n "<$D>" | cut -d: -f1
}

for fmt in raw qcow2; do
    for existing in yes no; do
        tag="$fmt, target existing: $existing"
        reset() {
            rm -f "$D"/* "$D"/.[!.]*
            [ $existing = yes ] && qemu-img convert -f raw -O $fmt "$T/old.raw" "$D/out" 
            return 0
        }
        reset
        idx=$(dir_fsyncs "$DISKIMG" convert -O $fmt "$T/new.raw" "$D/out")
        [ -n "$idx" ] || fail "$tag: the folder was not synced"
        for i in $idx; do
            reset
            rc=0
            strace -o /dev/null -e inject=fsync:error=EIO:when=$i \
                "$DISKIMG" convert -O $fmt "$T/new.raw" "$D/out" 2>"$T/err" || rc=$?
            [ $rc = 1 ] || { cat "$T/err" >&2; fail "$tag: folder fsync #$i failed: exit $rc"; }
            grep -q "cannot sync the folder.*Input/output error" "$T/err" ||
                { cat "$T/err" >&2; fail "$tag: no message"; }
            if [ $existing = yes ]; then
                qcompare "$T/old.raw" "$D/out"
                [ "$(ls -A "$D")" = out ] || fail "$tag: left: $(ls -A "$D")"
            else
                [ -z "$(ls -A "$D")" ] || fail "$tag: left: $(ls -A "$D")"
            fi
        done
        echo "$tag: a failed folder fsync undoes the commit"
    done
done

# -t unsafe: no fsync of anything
rm -f "$D"/*
idx=$(dir_fsyncs "$DISKIMG" convert -t unsafe -O qcow2 "$T/new.raw" "$D/out")
[ -z "$idx" ] || fail "-t unsafe synced the folder"
qcompare "$T/new.raw" "$D/out"
exit 0
