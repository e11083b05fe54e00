#!/bin/bash
# `convert -n` into an existing qcow2 image follows the target's references
# under the same folder rule as an input's: a target whose backing file is a
# host file outside its folder is refused (before, the in-place writer
# opened it with external references allowed and copied its bytes into the
# target's partial last cluster), the target is left as it was, and
# --allow-external relaxes the rule as it does for inputs.  The chain of a
# new output's backing file (-B) obeys the rule too.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

mkdir host tgt
gen -s 91 -m 4K -M 64K 2M host/secret.raw
# the source ends 1 KiB into the target's second cluster
gen -s 92 -m 4K -M 16K 66560 src.raw
qemu-img create -q -f qcow2 -b ../host/secret.raw -F raw tgt/t.qcow2 2M || fail "qemu-img"
cp tgt/t.qcow2 before.qcow2

expect_error "refers to '../host/secret.raw'.*outside the image's folder.*allow-external" \
    "$DISKIMG" convert -n -O qcow2 src.raw tgt/t.qcow2
cmp before.qcow2 tgt/t.qcow2 || fail "the refused target was changed"

# the rule also covers a symlink out, placed in the target's folder
ln -s ../host/secret.raw tgt/base.raw
qemu-img create -q -f qcow2 -b base.raw -F raw tgt/l.qcow2 2M || fail "qemu-img"
expect_error "base.raw.*leads outside the image's folder" \
    "$DISKIMG" convert -n -O qcow2 src.raw tgt/l.qcow2

# --allow-external: as qemu-img does it (the backing file's bytes past the
# source's end stay visible through the target)
cp before.qcow2 tgt/t.qcow2
cp before.qcow2 tgt/q.qcow2
ok "$DISKIMG" convert --allow-external -n -O qcow2 src.raw tgt/t.qcow2
qemu-img convert -n -f raw -O qcow2 src.raw tgt/q.qcow2 || fail "qemu-img convert -n"
qcompare tgt/q.qcow2 tgt/t.qcow2
qemu-img check -q tgt/t.qcow2 || fail "qemu-img check"

# the same for the chain of a new output's backing file (-B): the file is
# the user's choice, the references it makes obey the folder rule
expect_error "refers to '../host/secret.raw'.*outside the image's folder" \
    "$DISKIMG" convert -O qcow2 -B before.qcow2 -F qcow2 src.raw new.qcow2
[ ! -e new.qcow2 ] || fail "an output was left"
mkdir tgt2 && cp before.qcow2 tgt2/b.qcow2
ok "$DISKIMG" convert --allow-external -O qcow2 -B ../tgt2/b.qcow2 -F qcow2 src.raw tgt/new.qcow2
exit 0
