#!/bin/bash
# dd against qemu-img dd on the same inputs: qcow2 (with a backing file),
# vmdk, raw and vpc sources (also named by --image-opts strings), raw and qcow2 outputs (vmdk, vpc, vdi for a
# few), bs/count/skip combinations (odd block sizes, count and skip past the
# end, sizes with suffixes and fractions): the same exit status and
# messages, the same virtual size, qemu-img compare of the two outputs
# identical and qemu-img check clean.  Zero runs stay holes; a failed run
# leaves nothing at the target.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io

# sources: 3 MiB + 1000 bytes of guest disk with data at odd places
base=$T/base.qcow2
qemu-img create -q -f qcow2 "$base" 3073000
qemu-io -f qcow2 -c "write -P 0x61 0 64k" -c "write -P 0x62 1000000 5000" "$base" >/dev/null
top=$T/top.qcow2
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 "$top"
qemu-io -f qcow2 -c "write -P 0x71 4096 700" -c "write -z 1000448 4096" \
    -c "write -P 0x72 3072000 1000" "$top" >/dev/null
qemu-img convert -f qcow2 -O raw "$top" "$T/src.raw"
qemu-img convert -f qcow2 -O vmdk "$top" "$T/src.vmdk"
qemu-img convert -f qcow2 -O vpc "$top" "$T/src.vhd"

# run_both OUTFMT ARGS...: qemu-img dd and diskimg dd with the same
# arguments, of= added (q.out, d.out); compare status, messages, result
run_both() {
    local ofmt=$1; shift
    local qrc=0 drc=0
    rm -f "$T/q.out" "$T/d.out"
    # side by side: the wall time is mostly waiting for the disk
    (cd "$T" && qemu-img dd -O "$ofmt" "$@" of=q.out) >"$T/q.so" 2>"$T/q.err" &
    local qpid=$!
    (cd "$T" && "$DISKIMG" dd -O "$ofmt" "$@" of=d.out) >"$T/d.so" 2>"$T/d.err" || drc=$?
    wait $qpid || qrc=$?
    grep -q "AddressSanitizer\|runtime error" "$T/d.err" && { cat "$T/d.err"; fail "sanitizer: dd $*"; }
    [ $qrc = $drc ] || { cat "$T/q.err" "$T/d.err"; fail "dd -O $ofmt $*: exit $drc, qemu-img $qrc"; }
    sed 's/^qemu-img: //' "$T/q.err" > "$T/q.msg"
    sed 's/^diskimg: //' "$T/d.err" > "$T/d.msg"
    diff "$T/q.msg" "$T/d.msg" >/dev/null ||
        { diff "$T/q.msg" "$T/d.msg"; fail "dd -O $ofmt $*: messages differ from qemu-img's"; }
    [ -s "$T/d.so" ] && fail "dd -O $ofmt $*: printed on stdout"
    if [ $qrc != 0 ]; then
        [ -e "$T/d.out" ] && fail "dd -O $ofmt $*: output left behind by a failed run"
        return 0
    fi
    local qv dv
    qv=$(qemu-img info -f "$ofmt" --output=json "$T/q.out" | jq '."virtual-size"')
    dv=$(qemu-img info -f "$ofmt" --output=json "$T/d.out" | jq '."virtual-size"')
    [ "$qv" = "$dv" ] || fail "dd -O $ofmt $*: virtual size $dv, qemu-img $qv"
    if [ "$ofmt" = raw ]; then
        cmp "$T/q.out" "$T/d.out" || fail "dd -O raw $*: content differs"
    else
        qemu-img compare -q -f "$ofmt" -F "$ofmt" "$T/q.out" "$T/d.out" ||
            fail "dd -O $ofmt $*: qemu-img compare says the outputs differ"
        if [ "$ofmt" != vpc ]; then
            qemu-img check -q -f "$ofmt" "$T/d.out" || fail "dd -O $ofmt $*: check not clean"
        fi
    fi
}

# every source, raw and qcow2 outputs, the block arithmetic's cases
for src in top.qcow2 src.vmdk src.raw src.vhd; do
    for ofmt in raw qcow2; do
        run_both $ofmt if=$src bs=64k
        run_both $ofmt if=$src bs=1M count=2 skip=1      # count counts from the start
    done
done
run_both raw if=top.qcow2 bs=7 skip=142857 count=143000
run_both qcow2 if=src.vmdk bs=7 skip=142857 count=143000
# more cases on one source
s=top.qcow2
for args in "bs=1000 count=1" "bs=4096 skip=244" "bs=1M skip=3 count=2" \
            "bs=65537 count=20 skip=3" "bs=1.5k count=2k skip=1.5k" "count=0" \
            "bs=3000000 skip=1" "bs=2147483647" "bs=1M skip=100 count=3" \
            "skip=18014398509481984" "bs=0x1k count=1" "bs=1M bs=4k count=3" \
            "bs=512 count=6002.5k skip=6000"; do
    # shellcheck disable=SC2086
    run_both raw if=$s $args
done
run_both qcow2 if=$s bs=1000 count=1
run_both qcow2 if=$s bs=1M skip=3 count=2
for ofmt in vmdk vpc vdi; do
    run_both $ofmt if=$s bs=1000 count=1000 skip=3
done

# bad operands and options: the same messages and status 1, no output
for args in "bs=0" "bs=-1" "bs=2147483648" "bs=1.1" "bs=512x" "bs= 512x" "bs=" \
            "count=-1" "count=abc" "count=8E" "count=16E" "count=1e3" "count=0.5" \
            "count=99999999999999999999" "count=99999999999999999999k" "skip=1k5" \
            "skip=0x1.5" "skip=1,5k" "foo=1" "foo" "=3" "if=$s bs" "iff=$s" "of" \
            "bs=1 bs=0"; do
    # shellcheck disable=SC2086
    run_both raw if=$s $args
done
# missing if= or of=, a missing input: exit 1 and nothing written
for args in "if=$T/$s" "of=$T/x.raw" ""; do
    rc=0
    # shellcheck disable=SC2086
    "$DISKIMG" dd $args 2>"$T/err" || rc=$?
    [ $rc = 1 ] || fail "dd $args: exit $rc"
    grep -qx "diskimg: Must specify both input and output files" "$T/err" ||
        { cat "$T/err"; fail "dd $args: message"; }
done
[ -e "$T/x.raw" ] && fail "an output was made without an input"
expect_error "no such file|No such file" "$DISKIMG" dd if="$T/none.raw" of="$T/x.raw"
[ -e "$T/x.raw" ] && fail "an output was made for a missing input"
expect_error "^diskimg: Unknown file format$" "$DISKIMG" dd -O nope if="$T/$s" of="$T/x.raw"
expect_error "^diskimg: Format driver 'ova' does not support image creation$" \
    "$DISKIMG" dd -O ova if="$T/$s" of="$T/x.raw"
[ -e "$T/x.raw" ] && fail "an output was made for a bad -O"
# option errors: qemu-img's first line
for args in "-x" "--nope" "-f" "-O"; do
    qemu-img dd $args 2>&1 | head -n 1 | sed 's/^qemu-img: //' > "$T/q.msg"
    rc=0
    "$DISKIMG" dd $args 2>"$T/d.err" || rc=$?
    [ $rc = 1 ] || fail "dd $args: exit $rc"
    head -n 1 "$T/d.err" | sed 's/^diskimg: //' | diff "$T/q.msg" - || fail "dd $args: message"
done
# --image-opts: INPUT as an option string naming a file
for spec in driver=qcow2,file.filename=top.qcow2 file.filename=src.vmdk \
            driver=raw,file.filename=top.qcow2 driver=file,filename=src.raw \
            driver=qcow2,file.driver=file,file.filename=top.qcow2,force-share=on \
            driver=vpc,file.filename=src.vhd,driver=raw "file.filename=top.qcow2," \
            top.qcow2 file=top.qcow2 driver=qcow2 "" driver=file driver=nope,file.filename=top.qcow2 \
            driver=qcow2,file.filename=top.qcow2,foo=1 "driver=qcow2,,x,file.filename=top.qcow2"; do
    run_both raw --image-opts "if=$spec" bs=64k count=20 skip=1
done
run_both raw --image-opts -f qcow2 if=driver=qcow2,file.filename=top.qcow2

# a hex number with a suffix: qemu-img 7.2's deprecation warning, and it works
run_both raw if=$s count=0x1k
grep -q "warning: Using a multiplier suffix on hex numbers is deprecated: 0x1k" "$T/d.err" ||
    fail "no hex suffix warning"

# a pipe: refused as input (its size is not known first), nothing left;
# as output, raw and qcow2 (written in two passes) as to a file
cat "$T/src.raw" | expect_error "not a pipe" "$DISKIMG" dd if=/dev/stdin of="$T/p.raw"
[ -e "$T/p.raw" ] && fail "an output was made for a pipe input"
(cd "$T" && qemu-img dd -O raw if=top.qcow2 of=ref.raw bs=64k count=30 skip=2)
"$DISKIMG" dd -O qcow2 if="$T/top.qcow2" of=/dev/stdout bs=64k count=30 skip=2 | cat > "$T/p.qcow2"
[ "${PIPESTATUS[0]}" = 0 ] || fail "qcow2 to a pipe failed"
qcompare "$T/p.qcow2" "$T/ref.raw"
"$DISKIMG" dd if="$T/top.qcow2" of=/dev/stdout bs=64k count=30 skip=2 | cmp - "$T/ref.raw" ||
    fail "raw to a pipe differs"
"$DISKIMG" dd -O vdi if="$T/top.qcow2" of=/dev/stdout 2>"$T/err" | cat >/dev/null
[ "${PIPESTATUS[0]}" = 1 ] && grep -q "vdi output to a pipe is not supported" "$T/err" ||
    fail "vdi to a pipe not refused"

# the output is never the input
cp "$T/src.raw" "$T/self.raw"
expect_error "also an input" "$DISKIMG" dd if="$T/self.raw" of="$T/self.raw"
cmp "$T/self.raw" "$T/src.raw" || fail "the input was changed"
# long option names: the same as the short ones
ok "$DISKIMG" dd --format qcow2 --output-format qcow2 --force-share bs=4k count=300 \
    if="$T/$s" of="$T/long.qcow2"
ok "$DISKIMG" dd -f qcow2 -O qcow2 -U bs=4k count=300 if="$T/$s" of="$T/short.qcow2"
qcompare "$T/long.qcow2" "$T/short.qcow2"
[ "$(qemu-img info --output=json "$T/long.qcow2" | jq -r .format)" = qcow2 ] || fail "--output-format"
"$DISKIMG" dd --help | grep -q "^Usage: diskimg dd" || fail "dd --help"

# zero runs stay holes: 3 MiB of guest disk, 64 KiB + 6 KiB of data
ok "$DISKIMG" dd if="$T/$s" of="$T/sparse.raw" bs=1M count=3
[ "$(alloc "$T/sparse.raw")" -le $((1024 * 1024)) ] ||
    fail "raw output not sparse: $(alloc "$T/sparse.raw") bytes allocated"
ok "$DISKIMG" dd -O qcow2 if="$T/$s" of="$T/sparse.qcow2"
[ "$(alloc "$T/sparse.qcow2")" -le $((1024 * 1024)) ] || fail "qcow2 output not sparse"
exit 0
