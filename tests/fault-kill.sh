#!/bin/bash
# Killed mid-conversion.  The conversion is made slow deterministically
# (DISKIMG_FAULT=write:1+:delayMS, or a source pipe that stops delivering),
# then killed once its temporary output exists:
#   SIGKILL            nothing at the target path; the temporary file that
#                      cannot be cleaned up is never a valid image (qcow2:
#                      the header is written last); a rerun succeeds
#   SIGINT/TERM/HUP    the process dies of that signal, nothing at the target
#                      path and no temporary file left
# The input is unchanged every time.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault/lib.sh"
mkdir -p "$T/in" "$T/o"
gen -s 14 -m 64K -M 512K 4M "$T/in/src.raw"
qemu-img convert -f raw -O qcow2 "$T/in/src.raw" "$T/in/src.qcow2"
qemu-img convert -f raw -O vmdk -o subformat=streamOptimized "$T/in/src.raw" "$T/in/src.vmdk"
pairs="src.raw:raw src.raw:qcow2 src.qcow2:raw src.qcow2:qcow2"
ok "$DISKIMG" info "$T/in/src.vmdk" >/dev/null
pairs="$pairs src.vmdk:qcow2"
checksum_inputs

# wait_tmp: until a temporary output exists in $T/o (5 s at most)
wait_tmp() {
    local i
    for ((i = 0; i < 250; i++)); do
        ls -A "$T/o" | grep -q diskimg- && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$T/err" >&2; fail "$1: ended before it was killed"; }
        sleep 0.02
    done
    fail "$1: no temporary output appeared"
}

for p in $pairs; do
    IFS=: read -r src fmt <<<"$p"
    for sig in KILL INT TERM HUP; do
        tag="$p SIG$sig"
        DISKIMG_FAULT=write:1+:delay150 "$DISKIMG" convert -O "$fmt" "$T/in/$src" "$T/o/out.$fmt" \
            2>"$T/err" &
        pid=$!
        wait_tmp "$tag"
        sleep 0.2
        kill -$sig $pid
        rc=0; wait $pid || rc=$?
        [ $rc -eq $((128 + $(kill -l $sig))) ] || { cat "$T/err" >&2; fail "$tag: exit $rc"; }
        [ -e "$T/o/out.$fmt" ] && fail "$tag: a file at the target path"
        if [ $sig = KILL ]; then
            left=$(ls -A "$T/o")
            [ "$(echo "$left" | wc -l)" = 1 ] && [[ $left == .out.$fmt.diskimg-* ]] ||
                fail "$tag: expected one temporary file, found: $left"
            if [ "$fmt" = qcow2 ] && qemu-img info -f qcow2 "$T/o/$left" >/dev/null 2>&1; then
                fail "$tag: the killed temporary output is a valid qcow2 image"
            fi
            # a rerun is not disturbed by the leftover
            "$DISKIMG" convert -O "$fmt" "$T/in/$src" "$T/o/out.$fmt" || fail "$tag: rerun"
            same_content "$T/in/$src" "$T/o/out.$fmt"
            rm -f "$T/o/out.$fmt" "$T/o/$left"
        fi
        empty_dir "$T/o" "$tag"
        unchanged "$tag"
    done
    echo "$p: killed cleanly"
done

# a source pipe that stops delivering: no fault injection needed
mkfifo "$T/fifo"
for sig in KILL TERM; do
    "$DISKIMG" convert -f raw -O raw "$T/fifo" "$T/o/out.raw" 2>"$T/err" &
    pid=$!
    exec 3>"$T/fifo"
    head -c 1M "$T/in/src.raw" >&3
    wait_tmp "pipe SIG$sig"
    sleep 0.2
    kill -$sig $pid
    rc=0; wait $pid || rc=$?
    exec 3>&-
    [ $rc -eq $((128 + $(kill -l $sig))) ] || { cat "$T/err" >&2; fail "pipe SIG$sig: exit $rc"; }
    [ -e "$T/o/out.raw" ] && fail "pipe SIG$sig: a file at the target path"
    [ $sig = KILL ] && rm -f "$T"/o/.out.raw.diskimg-*
    empty_dir "$T/o" "pipe SIG$sig"
done
exit 0
