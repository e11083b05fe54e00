#!/bin/bash
# The folder rule cannot be raced: a reference is opened beneath the image's
# folder in one step, not checked by name and opened again by name.  A
# preloaded library (tests/preload/refswap.c) swaps a symlink to a host
# file in right before the open of the reference, every time: the outside
# file's bytes must never come out.  Both ways of opening are run: openat2
# (RESOLVE_BENEATH), and the component walk used where openat2 is missing
# (the library makes it fail with ENOSYS).  Without a race: a symlink in the
# folder pointing out is refused, one pointing inside is followed, as are a
# ".." that comes back inside and a symlinked subfolder inside.
. "$(dirname "$0")/lib.sh"
need qemu-img
CC=${CC:-cc}
need "$CC"
cd "$T" || fail "cd"

"$CC" -shared -fPIC -O1 -o refswap.so "$TOP/tests/preload/refswap.c" -ldl ||
    fail "cannot build the preload library"
# the ASan runtime must otherwise come first in the library list
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

mkdir out img img/sub img/data
head -c 65536 /dev/zero | tr '\0' '\136' > out/secret.raw    # 0x5e bytes
head -c 65536 /dev/zero | tr '\0' '\021' > inside.raw        # 0x11 bytes
cp out/secret.raw out/a.raw
flat() { printf '# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\ncreateType="monolithicFlat"\n\nRW 128 FLAT "%s" 0\n' "$1"; }

# no_secret OUT: the output holds no byte of the outside file
no_secret() {
    [ -e "$1" ] || return 0
    if grep -qF '^^^^^^^^^^^^^^^^' "$1"; then
        fail "the outside file's bytes came out in $1"
    fi
}
# swapped MODE RE ARGS...: convert ARGS with the swap armed; must be
# refused with RE (or, RE empty, succeed with the inside bytes)
swapped() {
    local mode=$1 re=$2; shift 2
    rm -f o.raw
    local rc=0
    env LD_PRELOAD="$T/refswap.so" REFSWAP_NO_OPENAT2=$mode \
        "$DISKIMG" convert -O raw "$@" o.raw 2>err || rc=$?
    no_secret o.raw
    if [ -n "$re" ]; then
        [ $rc -eq 1 ] || { cat err; fail "swap ($mode) $*: exit $rc, not 1"; }
        grep -Eq -- "$re" err || { cat err; fail "swap ($mode) $*: message"; }
        [ ! -e o.raw ] || fail "swap ($mode) $*: an output was left"
    else
        [ $rc -eq 0 ] || { cat err; fail "swap ($mode) $*: exit $rc"; }
        cmp -s inside.raw o.raw || fail "swap ($mode) $*: not the inside bytes"
    fi
}
reset() {
    rm -rf img/sub img/sub.moved img/a.raw img/.swap img/.swapdir
    mkdir img/sub
    cp inside.raw img/a.raw
    cp inside.raw img/sub/a.raw
    ln -s ../out/secret.raw img/.swap
    ln -s ../out img/.swapdir
}

flat a.raw > img/top.vmdk
flat sub/a.raw > img/deep.vmdk
qemu-img create -q -u -f qcow2 -b a.raw -F raw img/over.qcow2 64K || fail "qemu-img"
for mode in 0 1; do
    # the file itself becomes a symlink out, right before it is opened
    reset
    REFSWAP_NAME=a.raw REFSWAP_FROM=img/a.raw REFSWAP_TO=img/.swap \
        swapped $mode "leads outside the image's folder" img/top.vmdk
    reset
    REFSWAP_NAME=a.raw REFSWAP_FROM=img/a.raw REFSWAP_TO=img/.swap \
        swapped $mode "leads outside the image's folder" img/over.qcow2
    # the folder on the way becomes a symlink out: before it is entered ...
    reset
    REFSWAP_NAME=$([ $mode = 1 ] && echo sub || echo a.raw) \
        REFSWAP_FROM=img/sub REFSWAP_TO=img/.swapdir \
        swapped $mode "leads outside the image's folder" img/deep.vmdk
    # ... and once it was entered (the walk holds it: the inside bytes)
    if [ $mode = 1 ]; then
        reset
        REFSWAP_NAME=a.raw REFSWAP_FROM=img/sub REFSWAP_TO=img/.swapdir \
            swapped $mode "" img/deep.vmdk
    fi
done

# without a race, in both ways
rm -rf img/sub.moved && reset
ln -s ../out/secret.raw img/out-link.raw
ln -s data/real.raw img/in-link.raw
cp inside.raw img/data/real.raw
ln -s ../a.raw img/sub/up-link.raw
ln -s data img/lnk
flat out-link.raw > img/out.vmdk
flat in-link.raw > img/in.vmdk
flat sub/../a.raw > img/back.vmdk
flat sub/up-link.raw > img/uplink.vmdk
flat lnk/real.raw > img/lnkdir.vmdk
flat "$T/img/data/real.raw" > img/absin.vmdk
flat ../a.raw > img/sub/nested.vmdk       # its folder is sub: refused as written
for mode in 0 1; do
    unset REFSWAP_NAME
    swapped $mode "leads outside the image's folder" img/out.vmdk
    swapped $mode "" img/in.vmdk
    swapped $mode "" img/back.vmdk
    swapped $mode "" img/uplink.vmdk
    swapped $mode "" img/lnkdir.vmdk
    swapped $mode "" img/absin.vmdk
    swapped $mode "outside the image's folder" img/sub/nested.vmdk
done
# --allow-external still follows the link out
rm -f o.raw
ok "$DISKIMG" convert --allow-external -O raw img/out.vmdk o.raw
cmp out/secret.raw o.raw || fail "--allow-external: not the linked file"
exit 0
