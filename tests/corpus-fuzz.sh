#!/bin/bash
# Replays the inputs the fuzzers found (tests/corpus/fuzz/<target>/: each
# once crashed, hung or ran out of memory before its fix):
#   - through the fuzz target itself, built without libFuzzer
#     ($BUILD/fuzz/<target>, the same code path, with the build's sanitizers);
#   - through the real binary: `diskimg info` and `convert -O raw/-O qcow2`
#     (image targets; fuzz_vmdk_inplace: `rebase -b ""` and `-u -b ""`
#     too), `convert -` from a pipe (fuzz_stream) or `create -o` and
#     `convert -S` (the option target),
#     each under `timeout 10` and 512 MiB: exit 0 or 1 only, never a signal
#     or a sanitizer report, a message naming the file on failure, no output
#     left behind.
. "$(dirname "$0")/lib.sh"
R=$TOP/tests/corpus/fuzz
# the inputs are committed: none here is a broken checkout, not a missing tool
ls "$R"/*/* >/dev/null 2>&1 || fail "no fuzz regression inputs in $R"
asan=0
grep -q __asan_init "$DISKIMG" && asan=1
mkdir -p "$T/o"

# bounded CMD...: sets rc; fails on a signal, a hang, a sanitizer report
bounded() {
    rc=0
    if [ $asan = 0 ]; then
        ( ulimit -v $((512 * 1024)); exec timeout -s KILL 10 "$@" ) >/dev/null 2>"$T/err" || rc=$?
    else
        timeout -s KILL 10 "$@" >/dev/null 2>"$T/err" || rc=$?
    fi
    if grep -q "AddressSanitizer\|runtime error\|LeakSanitizer" "$T/err" || [ $rc -gt 1 ]; then
        cat "$T/err" >&2
        fail "exit $rc: $*"
    fi
    return 0
}

n=0
for dir in "$R"/*/; do
    target=$(basename "$dir")
    bin=$BUILD/fuzz/$target
    [ -x "$bin" ] || fail "$bin not built (make unit)"
    for f in "$dir"*; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        name=$(basename "$f")
        bounded "$bin" "$f"
        [ $rc = 0 ] || { cat "$T/err" >&2; fail "$target $name: the target failed"; }
        if [ "$target" = fuzz_vmdk_inplace ]; then
            # what the target drives, through the real binary: rebase -b ""
            # and -u -b "" of a copy (of the image alone: a container's
            # files are unpacked by the target only)
            mkdir -p "$T/r"
            for u in "" -u; do
                cp "$f" "$T/r/img.vmdk"
                bounded "$DISKIMG" rebase $u -b "" "$T/r/img.vmdk"
            done
            rm -rf "$T/r"
        fi
        case $target in
        fuzz_options)
            bounded "$DISKIMG" create -f qcow2 -o "$(tr -d '\0' < "$f")" "$T/o/x.qcow2" 1M
            rm -f "$T/o/x.qcow2"
            bounded "$DISKIMG" convert -S "$(tr -d '\0' < "$f")" -O raw "$f" "$T/o/x.raw"
            rm -f "$T/o/x.raw"
            ;;
        fuzz_stream)
            # what `convert -` gets from a pipe, the format probed
            bounded sh -c 'exec "$1" convert -O raw - "$2" < "$3"' sh "$DISKIMG" "$T/o/out" "$f"
            [ $rc = 1 ] && ! grep -q "(stdin)" "$T/err" && { cat "$T/err" >&2; fail "$name: no file named"; }
            rm -f "$T/o/out"
            ls -A "$T/o" | grep -q . && fail "$name: left behind: $(ls -A "$T/o")"
            ;;
        *)
            fmt=${target#fuzz_}
            fmt=${fmt%%_*}      # fuzz_qcow2_inplace: a qcow2 image
            cp "$f" "$T/in.$fmt"
            bounded "$DISKIMG" info -f "$fmt" "$T/in.$fmt"
            [ $rc = 1 ] && ! grep -q "in\.$fmt" "$T/err" && { cat "$T/err" >&2; fail "$name: info: no file named"; }
            for ofmt in raw qcow2; do
                bounded "$DISKIMG" convert -f "$fmt" -O $ofmt "$T/in.$fmt" "$T/o/out"
                if [ $rc = 1 ]; then
                    grep -q "in\.$fmt" "$T/err" || { cat "$T/err" >&2; fail "$name: convert: no file named"; }
                    ls -A "$T/o" | grep -q . && fail "$name: left behind: $(ls -A "$T/o")"
                fi
                rm -f "$T/o/out"
            done
            cmp -s "$f" "$T/in.$fmt" || fail "$name: the input changed"
            ;;
        esac
    done
done
echo "$n inputs replayed"
exit 0
