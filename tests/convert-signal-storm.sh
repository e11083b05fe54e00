#!/bin/bash
# SIGTERM, SIGINT and SIGHUP at random instants of short conversions over
# an existing target (raw, qcow2, a vmdk of several files): each run ends
# with exit 0 or with the signal (never another status, a crash or a
# sanitizer report), the target holds the old image or the new one, whole,
# and no temporary file is left.  The signals are taken by one thread that
# waits for a commit in progress; the worker threads never run a handler.
# Then a SIGTERM sent while each rename or link of a vmdk commit is held up.
. "$(dirname "$0")/lib.sh"
need qemu-img
mkdir -p "$T/d"
D=$T/d
gen -s 21 -m 4K -M 256K 6M "$T/old.raw"
gen -s 22 -m 4K -M 256K 6M "$T/new.raw"
outs="raw:out.raw qcow2:out.qcow2 vmdk:out.vmdk"

for o in $outs; do
    fmt=${o%%:*} f=${o#*:}
    opt=; [ $fmt = vmdk ] && opt="-o subformat=twoGbMaxExtentSparse"
    "$DISKIMG" convert -O $fmt $opt "$T/old.raw" "$D/$f" || fail "setup $f"
done

RANDOM=4242
runs=0 killed=0 done=0
for ((i = 0; i < 20; i++)); do
    o=$(echo $outs | cut -d' ' -f$((i % 3 + 1)))
    fmt=${o%%:*} f=${o#*:}
    opt=; [ $fmt = vmdk ] && opt="-o subformat=twoGbMaxExtentSparse"
    src=$T/new.raw; [ $((i / 3 % 2)) = 1 ] && src=$T/old.raw
    sig=$(echo TERM INT HUP | cut -d' ' -f$((RANDOM % 3 + 1)))
    # each write held 4 ms: the run lasts long enough for the signal to
    # land at a random instant of it, however fast the machine is
    DISKIMG_FAULT=write:1+:delay4 "$DISKIMG" convert -O $fmt $opt "$src" "$D/$f" 2>"$T/err" &
    pid=$!
    sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
    kill -$sig $pid 2>/dev/null
    rc=0; wait $pid 2>/dev/null || rc=$?
    runs=$((runs + 1))
    case $rc in
        0) done=$((done + 1)) ;;
        $((128 + $(kill -l $sig)))) killed=$((killed + 1)) ;;
        *) cat "$T/err" >&2; fail "run $i ($f, SIG$sig): exit $rc" ;;
    esac
    grep -q "AddressSanitizer\|runtime error\|LeakSanitizer" "$T/err" &&
        { cat "$T/err" >&2; fail "run $i: sanitizer report"; }
    ls -A "$D" | grep -q diskimg- && fail "run $i ($f, SIG$sig, exit $rc): left: $(ls -A "$D")"
    qemu-img compare -q "$T/old.raw" "$D/$f" 2>/dev/null ||
        qemu-img compare -q "$T/new.raw" "$D/$f" 2>/dev/null ||
        fail "run $i ($f, SIG$sig, exit $rc): the target is neither image"
done
echo "$runs runs: $killed killed, $done finished first"
[ $killed -gt 5 ] || fail "too few runs were killed ($killed): the test tests little"

# SIGTERM while a step of the commit is held up (strace delays the
# syscall; x86_64 numbers: 82 rename, 86 link): the signal waits until the
# commit is done, then the process dies of it (or exits 0 first); the new
# image is whole, no temporary or "-old-" file is left
if command -v strace >/dev/null; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0   # not under ptrace
    f=out.vmdk opt="-o subformat=twoGbMaxExtentSparse"
    for step in rename:82:1 rename:82:2 link:86:1; do
        IFS=: read -r sc nr n <<<"$step"
        "$DISKIMG" convert -O vmdk $opt "$T/old.raw" "$D/$f" || fail "setup"
        timeout -s KILL 40 strace -o /dev/null -e inject=$sc:delay_enter=2500000:when=$n \
            "$DISKIMG" convert -O vmdk $opt "$T/new.raw" "$D/$f" 2>"$T/err" &
        pid=$!
        reached=no end=$((SECONDS + 20)) c=
        while [ $SECONDS -lt $end ] && kill -0 $pid 2>/dev/null; do
            if [ -z "$c" ]; then
                c=$(pgrep -P $pid | head -n 1)             # strace (under timeout)
                [ -n "$c" ] && c=$(pgrep -P "$c" | head -n 1)   # diskimg
            elif read -r cur _ < "/proc/$c/syscall" 2>/dev/null && [ "$cur" = $nr ]; then
                reached=yes
                break
            fi
            sleep 0.01
        done
        [ $reached = yes ] && kill -TERM "$c"
        rc=0; wait $pid 2>/dev/null || rc=$?
        [ $reached = yes ] || fail "the commit never reached $sc #$n"
        # (the main thread may finish and exit 0 before the signal thread,
        # woken when the commit lets go of the lock, makes the process die)
        [ $rc = 143 ] || [ $rc = 0 ] ||
            { cat "$T/err" >&2; fail "SIGTERM in $sc #$n of the commit: exit $rc"; }
        ls -A "$D" | grep -q diskimg- && fail "SIGTERM in $sc #$n: left: $(ls -A "$D")"
        qemu-img compare -q "$T/new.raw" "$D/$f" ||
            fail "SIGTERM in $sc #$n of the commit: the new image is not whole"
    done
    echo "SIGTERM during the commit: it completes first"
fi
exit 0
