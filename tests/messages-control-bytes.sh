#!/bin/bash
# Messages echo strings an image holds (backing file names, vmdk
# descriptor fields, extent names; here a qcow2 backing file name).  A control byte in them must not reach
# the terminal as an escape sequence: every message writes it as \xNN.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || fail "cd"
esc=$'\e[31mred\a'

# a qcow2 whose (missing) backing file name holds ESC and BEL
qemu-img create -q -f qcow2 -u -b "$esc" -F raw bad.qcow2 1M || fail "qemu-img create"
for cmd in "convert -O raw bad.qcow2 out.raw" "compare bad.qcow2 bad.qcow2" "map bad.qcow2"; do
    $DISKIMG $cmd 2> err >/dev/null && fail "$cmd: a missing backing file was accepted"
    LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' err && fail "$cmd: raw control bytes in: $(cat -v err)"
    grep -qF '\x1b[31mred\x07' err || fail "$cmd: the name is not shown escaped: $(cat -v err)"
done
[ -e out.raw ] && fail "output left behind"

exit 0
