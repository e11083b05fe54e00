#!/bin/bash
# -p when stderr is not a terminal prints what qemu-img -p prints, for the
# programs that parse it (KubeVirt CDI, oVirt): "    (NN.NN/100%)\r" on
# stdout, rising, ending at 100.00 and a newline -- the same lines as
# qemu-img's for convert, compare and rebase; nothing on stdout when stdout
# is the conversion's output ("-").
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || exit 1
gen -s 5 -M 1M 8M src.raw
qemu-img convert -q -f raw -O qcow2 src.raw src.qcow2

# check_lines FILE WHAT: qemu-img's progress format, rising, ending at 100%
check_lines() {
    local f=$1 what=$2
    [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$what: no final newline"
    tr '\r' '\n' < "$f" | grep '^ *(' > "$f.lines"
    grep -Evq '^    \([0-9]+\.[0-9]{2}/100%\)$' "$f.lines" && fail "$what: not qemu-img's lines: $(cat -A "$f")"
    [ "$(tail -n 1 "$f.lines")" = "    (100.00/100%)" ] || fail "$what: no final 100%: $(cat -A "$f")"
    sed 's/[^0-9.]*\([0-9.]*\)\/.*/\1/' "$f.lines" | sort -g -c 2>/dev/null || fail "$what: not rising: $(cat "$f.lines")"
}
for cmd in "convert -p -O raw src.qcow2 o.raw" "convert -p -f raw -O qcow2 src.raw o.qcow2" \
           "compare -p src.raw src.qcow2"; do
    rm -f o.raw o.qcow2
    "$DISKIMG" $cmd > d.out 2> d.err || fail "$cmd: exit status $?"
    [ -s d.err ] && fail "$cmd: stderr: $(cat d.err)"
    rm -f o.raw o.qcow2
    qemu-img $cmd > q.out 2> q.err || fail "qemu-img $cmd: exit status $?"
    check_lines q.out "qemu-img $cmd"   # the oracle's format, as this test reads it
    check_lines d.out "$cmd"
    # compare's verdict line after the progress, as qemu-img's
    [ "$(tr '\r' '\n' < d.out | grep -v '^ *(' | grep -v '^$')" = \
      "$(tr '\r' '\n' < q.out | grep -v '^ *(' | grep -v '^$')" ] || fail "$cmd: other lines differ"
done
# stdout carries the image: no progress mixed into it
"$DISKIMG" convert -p -O raw src.qcow2 - > piped.raw 2> p.err || fail "convert -p to stdout"
cmp -s piped.raw src.raw || fail "convert -p to stdout: the output has more than the image"
# -q wins over -p (nothing at all)
"$DISKIMG" convert -q -p -O raw src.qcow2 q.raw > qq.out 2>&1 || fail "-q -p"
[ -s qq.out ] && fail "-q -p printed: $(cat qq.out)"
exit 0
