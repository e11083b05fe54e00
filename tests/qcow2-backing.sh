#!/bin/bash
# Backing chains: qcow2 over qcow2 over raw (backing format honoured),
# overlays larger and smaller than their backing file, a chain without a
# backing format (probed), references leaving the image's folder (refused
# unless --allow-external), missing files and loops.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
gen -s 3 -a 90 -m 4K -M 64K 2M base.raw
qemu-img create -q -f qcow2 -b base.raw -F raw mid.qcow2
qemu-io -c 'write -P 0x10 64k 64k' -c 'write -z 512k 128k' -c 'write -P 0x11 1000k 3k' mid.qcow2 >/dev/null
qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2
qemu-io -c 'write -P 0x20 100k 64k' -c 'write -z 1500k 4k' top.qcow2 >/dev/null
readback top.qcow2
readback mid.qcow2
"$BDREAD" -m top.qcow2 > map
grep -q ' data 2$' map || { cat map; fail "no extent from depth 2"; }

# overlay larger than its backing file: past the backing file's end, zeros
qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 big.qcow2 5M
qemu-io -c 'write -P 0x30 4M 4k' big.qcow2 >/dev/null
readback big.qcow2
# overlay smaller than its backing file
qemu-img create -q -f qcow2 -b base.raw -F raw small.qcow2 1M
readback small.qcow2
# a deeper chain
prev=top.qcow2
for i in 1 2 3 4 5; do
    qemu-img create -q -f qcow2 -b $prev -F qcow2 l$i.qcow2
    qemu-io -c "write -P $((0x40 + i)) $((i * 192))k 8k" l$i.qcow2 >/dev/null
    prev=l$i.qcow2
done
readback l5.qcow2

# no backing format extension (its type renamed to an unknown one): probed,
# and the unknown extension is skipped
cp top.qcow2 noformat.qcow2
off=$(grep -obUaP '\xe2\x79\x2a\xca' noformat.qcow2 | head -n 1 | cut -d: -f1)
[ -n "$off" ] || fail "backing format extension not found"
poke noformat.qcow2 "$off" e2792acb
readback noformat.qcow2
"$DISKIMG" info --output=json noformat.qcow2 | grep -q backing-filename-format &&
    fail "an unknown extension was taken for the backing format"

# references that leave the image's folder
mkdir -p sub
qemu-img create -q -f qcow2 -b ../base.raw -F raw sub/up.qcow2
expect_error "outside the image's folder" "$DISKIMG" convert -O raw sub/up.qcow2 up.raw
[ -e up.raw ] && fail "output left behind after a refused reference"
ok "$DISKIMG" convert --allow-external -O raw sub/up.qcow2 up.raw
cmp up.raw base.raw || fail "--allow-external read differs"
qemu-img create -q -f qcow2 -b "$T/base.raw" -F raw sub/abs.qcow2
expect_error "outside the image's folder" "$DISKIMG" convert -O raw sub/abs.qcow2 abs.raw
# inside the folder an absolute path is fine
qemu-img create -q -f qcow2 -b "$T/base.raw" -F raw absin.qcow2
readback absin.qcow2

# a missing backing file, and a loop
qemu-img create -q -f qcow2 -b gone.qcow2 -F qcow2 -u orphan.qcow2 1M
expect_error "gone.qcow2.*does not exist" "$DISKIMG" convert -O raw orphan.qcow2 o.raw
qemu-img create -q -f qcow2 a.qcow2 1M
qemu-img create -q -f qcow2 -b a.qcow2 -F qcow2 b.qcow2
qemu-img rebase -u -b b.qcow2 -F qcow2 a.qcow2
expect_error "loop" "$DISKIMG" convert -O raw b.qcow2 loop.raw
exit 0
