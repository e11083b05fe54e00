#!/bin/bash
# Hosted sparse and streamOptimized VMDKs with every small grain size the
# format allows (tests/fuzz/make-vmdk-seeds.py writes them: qemu-img cannot)
# convert to what qemu-img reads from them, from the file and (streams)
# from a pipe.  A grain of 1..4 sectors has a read buffer smaller than 4 KiB:
# reading it must stay inside (the ASan build reports any overflow).
. "$(dirname "$0")/lib.sh"
need python3
need qemu-img
python3 "$TOP/tests/fuzz/make-vmdk-seeds.py" "$T/s" >/dev/null || fail "make-vmdk-seeds.py"

n=0
for g in 1 2 4 8 16 128 2048; do
    for kind in stream stream-nofooter sparse sparse-zg sparse-gtes comp; do
        img=$T/s/g$g-$kind.vmdk
        [ -f "$img" ] || continue
        # qemu-img reads compressed grains without markers only from 32 sectors
        [ "$kind" = comp ] && [ "$g" -lt 32 ] && continue
        rm -f "$T/out.raw"
        ok "$DISKIMG" convert -O raw "$img" "$T/out.raw"
        qemu-img compare -q -f vmdk -F raw "$img" "$T/out.raw" ||
            fail "grain of $g sectors, $kind: the output differs from what qemu-img reads"
        case $kind in
        stream*)
            rm -f "$T/out.raw"
            "$DISKIMG" convert -O raw - "$T/out.raw" < <(cat "$img") 2>"$T/err" ||
                { cat "$T/err" >&2; fail "grain of $g sectors, $kind, from a pipe"; }
            qemu-img compare -q -f vmdk -F raw "$img" "$T/out.raw" ||
                fail "grain of $g sectors, $kind, from a pipe: wrong content"
            ;;
        esac
        n=$((n + 1))
    done
done
# every size the loop names exists as a stream (the seeds did not change)
[ $n -ge 30 ] || fail "only $n images converted"
exit 0
