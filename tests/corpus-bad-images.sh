#!/bin/bash
# The bad-image corpus (tests/corpus/make-bad-images.sh): every case through
# `diskimg info`, `map`, `convert -O raw` and `convert -O qcow2`, each under
# `timeout 10` and 512 MiB of address space (peak RSS for the ASan build,
# whose shadow memory needs a larger address space).  A bad case must exit
# exactly 1 with a message naming the file and the problem (MANIFEST's
# regex), never a signal or a hang; no output file may be left (not even a
# temporary one); no input may change.  An `ok` case must give qemu-img's
# reading.  Usage: corpus-bad-images.sh [NAME-GLOB] (a subset, for debugging).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
glob=${1:-*}
C=$T/corpus
# made once per test run (both builds read the same cases): keyed by the
# generator and the qemu-img that helped make them
key=bad-images-$( { cat "$TOP/tests/corpus/make-bad-images.sh" "$TOP/tests/tools/vhdxpatch.py" \
                    "$TOP/tests/tools/vhdxmake.py"; qemu-img --version; } |
                  sha1sum | cut -c1-16)
cached "$key" "$C" "$TOP/tests/corpus/make-bad-images.sh" || fail "make-bad-images.sh failed"
O=$T/out
mkdir -p "$O"
asan=0
asan_build && asan=1
LIMIT_KB=$((512 * 1024))

# run NAME CMD...: $rc, $T/err; fails on a hang, a signal or too much memory
run() {
    local name=$1; shift
    rc=0
    if [ $asan = 0 ]; then
        ( ulimit -v $LIMIT_KB; exec timeout -s KILL 10 /usr/bin/time -f %M -o "$T/rss" "$@" ) \
            >"$T/stdout" 2>"$T/err" || rc=$?
    else
        timeout -s KILL 10 /usr/bin/time -f %M -o "$T/rss" "$@" >"$T/stdout" 2>"$T/err" || rc=$?
    fi
    # (read with builtins: a fork per check adds up over ~1200 runs)
    local rss="" err=""
    read -r -d '' rss < "$T/rss"
    read -r -d '' err < "$T/err"
    # /usr/bin/time reports a signal as "Command terminated by signal N"
    if [[ $rss == *"Command terminated by signal"* ]] || [ $rc -ge 124 ]; then
        cat "$T/err" >&2
        fail "$name: $* killed or hung (exit $rc; ${rss%%$'\n'*})"
    fi
    local kb=${rss##*$'\n'}
    [ -z "$kb" ] && kb=${rss%$'\n'} && kb=${kb##*$'\n'}
    [ "$kb" -le $LIMIT_KB ] 2>/dev/null || fail "$name: $* used ${kb} KiB (limit $LIMIT_KB)"
    if [[ $err == *AddressSanitizer* || $err == *"runtime error"* || $err == *LeakSanitizer* ]]; then
        cat "$T/err" >&2
        fail "$name: sanitizer report: $*"
    fi
    ERR=$err
    return 0
}

# expect NAME WANT REGEX CMD...
expect() {
    local name=$1 want=$2 re=$3; shift 3
    run "$name" "$@"
    if [ "$want" = bad ]; then
        [ $rc -eq 1 ] || { cat "$T/err" >&2; fail "$name: expected exit 1, got $rc: $*"; }
        grep -Eq -- "$re" "$T/err" ||
            { cat "$T/err" >&2; fail "$name: stderr does not match '$re': $*"; }
        # the file itself, or (for references) a file of its folder
        local dir=${name%/*} base=${name##*/}
        [ "$dir" = "$name" ] && dir=.
        [[ $ERR == *"$base"* ]] || { [ "$dir" != . ] && [[ $ERR == *"$dir/"* ]]; } ||
            { cat "$T/err" >&2; fail "$name: the message does not name the file: $*"; }
    else
        [ $rc -eq 0 ] || { cat "$T/err" >&2; fail "$name: expected success, got $rc: $*"; }
    fi
}

noleft() {
    local left=("$O"/* "$O"/.[!.]*)
    [ -e "${left[0]}" ] || [ -e "${left[1]}" ] || return 0
    fail "$1: left in the output folder: $(ls -A "$O")"
}

cd "$C" || fail "cd"
find . -type f ! -name MANIFEST -exec sha1sum {} + | sort > "$T/sums.before"
n=0
while IFS=$'\t' read -r name info conv re check; do
    # shellcheck disable=SC2053
    [[ $name == $glob ]] || continue
    n=$((n + 1))
    expect "$name" "$info" "$re" "$DISKIMG" info "$name"
    # map walks the block status only: 0 or 1, never a crash or a hang
    run "$name" "$DISKIMG" map --output=json "$name"
    [ $rc -le 1 ] || { cat "$T/err" >&2; fail "$name: map exit $rc"; }
    if [ "$check" != - ]; then
        run "$name" "$DISKIMG" check "$name"
        [ $rc = "$check" ] || { cat "$T/err" >&2; fail "$name: check exit $rc, expected $check"; }
    fi
    # an ok case: qemu-img's reading of it (or of the undamaged image), once,
    # outside $O; every output is compared with it
    if [ "$conv" != bad ]; then
        ref=$name
        [ "$conv" = same ] && ref=$re
        qemu-img convert -O raw "$ref" "$T/ref.raw" 2>"$T/qerr" ||
            { cat "$T/qerr" >&2; fail "$name: an ok case that qemu-img cannot read"; }
    fi
    for fmt in raw qcow2; do
        expect "$name" "$conv" "$re" "$DISKIMG" convert -O $fmt "$name" "$O/out.$fmt"
        if [ "$conv" = bad ]; then
            noleft "$name -O $fmt"
        elif [ $fmt = raw ]; then
            cmp -s "$O/out.raw" "$T/ref.raw" || fail "$name: content differs from qemu-img's reading"
            rm -f "$O/out.raw"
        else
            qemu-img compare -q -f qcow2 -F raw "$O/out.qcow2" "$T/ref.raw" ||
                fail "$name: -O qcow2 output differs from the source"
            rm -f "$O/out.qcow2"
        fi
    done
    # vmdk and OVA also read forward-only from a pipe (convert -)
    case $name in
    vmdk-*|ova-*)
        fmt=vmdk; [[ $name == ova-* ]] && fmt=ova
        run "$name" sh -c 'exec "$1" convert -f "$2" -O raw - "$3" < "$4"' sh \
            "$DISKIMG" "$fmt" "$O/pipe.raw" "$name"
        if [ $rc = 0 ] && [ "$conv" != bad ]; then
            cmp -s "$O/pipe.raw" "$T/ref.raw" || fail "$name: from a pipe: content differs"
            rm -f "$O/pipe.raw"
        elif [ $rc = 1 ]; then
            # a bad image, or one that needs random access
            [ "$conv" = bad ] || grep -Eq "seekable|pipe|stream" "$T/err" ||
                { cat "$T/err" >&2; fail "$name: from a pipe: exit 1"; }
        else
            cat "$T/err" >&2; fail "$name: from a pipe: exit $rc"
        fi
        noleft "$name from a pipe"
        ;;
    esac
done < MANIFEST
[ $n -gt 0 ] || fail "no case matches '$glob'"
find . -type f ! -name MANIFEST -exec sha1sum {} + | sort > "$T/sums.after"
diff "$T/sums.before" "$T/sums.after" >&2 || fail "an input image changed"
echo "$n cases"
exit 0
