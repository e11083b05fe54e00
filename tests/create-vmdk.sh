#!/bin/bash
# diskimg create -f vmdk makes what qemu-img create makes: the same
# "Formatting" line, a clean qemu-img check, the same virtual size and
# subformat; a monolithicSparse image has qemu-img's header and descriptor
# (CID aside) and file size; every image reads as zeros.  Options diskimg
# does not implement, and bad values, are refused with a message.
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
mkdir -p "$T/a" "$T/b"
cd "$T"

same_head() {   # A B: header fields and descriptor without the CID line
    $PY - "$1" "$2" <<'PY' || fail "$1: header or descriptor differs from qemu-img's"
import struct, sys
def parse(p):
    b = open(p, 'rb').read(21 * 512)
    d = [l for l in b[512:].split(b'\0')[0].decode().splitlines() if not l.startswith('CID=')]
    return struct.unpack_from('<IIIQQQQIQQQ', b, 0) + (b[72:79],), d
a, b = parse(sys.argv[1]), parse(sys.argv[2])
if a != b:
    sys.exit("%r\n  vs %r" % (a, b))
PY
}

while read -r opts size; do
    [ "$opts" = - ] && opts=
    rm -f a/x.vmdk b/x.vmdk
    (cd a && "$DISKIMG" create -f vmdk ${opts:+-o "$opts"} x.vmdk $size) > a.out 2>&1 ||
        { cat a.out; fail "create $opts $size"; }
    (cd b && qemu-img create -f vmdk ${opts:+-o "$opts"} x.vmdk $size) > b.out 2>&1 ||
        fail "qemu-img create $opts $size"
    diff -u b.out a.out >&2 || fail "Formatting line differs ($opts $size)"
    if [ "$size" = 0 ]; then
        # qemu-img 7.2 cannot open the empty images it makes; diskimg can
        "$DISKIMG" info --output=json a/x.vmdk | tr -d ' ' | grep -q '"virtual-size":0,' ||
            fail "empty image ($opts)"
        continue
    fi
    # qemu-img check and map read all 98304 tables of 3T (a minute): the
    # header and descriptor comparison below covers its layout
    case "$size" in *T) big=1;; *) big=;; esac
    [ -n "$big" ] || qemu-img check -q a/x.vmdk || fail "check: $opts $size"
    qemu-img info --output=json a/x.vmdk | grep -E '"virtual-size"|"create-type"' > a.info
    qemu-img info --output=json b/x.vmdk | grep -E '"virtual-size"|"create-type"' > b.info
    diff -u b.info a.info >&2 || fail "info differs ($opts $size)"
    case "$opts" in
    *streamOptimized*) ;;
    *)  same_head a/x.vmdk b/x.vmdk
        [ "$(stat -c %s a/x.vmdk)" = "$(stat -c %s b/x.vmdk)" ] || fail "file size ($opts $size)"
        [ "$(alloc a/x.vmdk)" -le $(( $(alloc b/x.vmdk) + $(alloc b/x.vmdk) / 20 + 16384 )) ] ||
            fail "allocated: $(alloc a/x.vmdk) vs qemu-img's $(alloc b/x.vmdk) ($opts $size)";;
    esac
    # reads as zeros, through qemu and through diskimg
    [ -z "$big" ] && qemu-img map --output=json a/x.vmdk | grep -q '"data": true' &&
        fail "data in a new image"
    "$BUILD/tools/vmdkcat" -m a/x.vmdk | grep -q ' data ' && fail "our reader sees data"
done <<'CASES'
- 100M
- 1000
- 0
- 3T
zeroed_grain=on 10M
compat6=on,adapter_type=lsilogic 10M
hwversion=14,adapter_type=buslogic,toolsversion=12345 1G
adapter_type=legacyESX 10M
subformat=monolithicSparse 5G
subformat=streamOptimized 100M
subformat=streamOptimized,zeroed_grain=on,adapter_type=ide 1000
subformat=streamOptimized 0
CASES

# images of several files: the same files, descriptor (CID aside) and sizes
for sub in monolithicFlat twoGbMaxExtentFlat twoGbMaxExtentSparse; do
    for size in 10M 4100M 0; do
        rm -rf a b && mkdir a b
        (cd a && "$DISKIMG" create -f vmdk -o subformat=$sub x.vmdk $size) > a.out 2>&1 ||
            { cat a.out; fail "create $sub $size"; }
        (cd b && qemu-img create -f vmdk -o subformat=$sub x.vmdk $size) > b.out 2>&1 ||
            fail "qemu-img create $sub $size"
        diff -u b.out a.out >&2 || fail "Formatting line differs ($sub $size)"
        [ "$(cd a && ls -a)" = "$(cd b && ls -a)" ] || { ls -la a b; fail "$sub $size: files"; }
        diff <(grep -v '^CID=' b/x.vmdk) <(grep -v '^CID=' a/x.vmdk) >&2 ||
            fail "$sub $size: descriptor"
        case $sub in *Flat)
            for f in $(cd b && ls | grep -v '^x.vmdk$'); do
                [ "$(stat -c %s a/$f)" = "$(stat -c %s b/$f)" ] || fail "$sub $size: size of $f"
            done;;
        esac
        [ "$size" = 0 ] && continue
        qemu-img check -q a/x.vmdk || fail "check $sub $size"
        case $sub in
        *Flat)  # flat extents map as data (as qemu-img's map says): all holes
            for f in a/x-f*.vmdk; do
                [ "$(alloc "$f")" = 0 ] || fail "$sub $size: $f is not all holes"
            done;;
        *)  "$BUILD/tools/vmdkcat" -m a/x.vmdk | grep -q ' data ' && fail "$sub $size: data";;
        esac
    done
done
rm -rf a b

# -o help, and what is refused
"$DISKIMG" create -f vmdk -o help > help.txt || fail "-o help"
for k in adapter_type compat6 hwversion subformat toolsversion zeroed_grain; do
    grep -q "^  $k=" help.txt || fail "-o help lacks $k"
done
expect_error "invalid parameter value: foo" "$DISKIMG" create -f vmdk -o subformat=foo x.vmdk 1M
expect_error "invalid parameter value: scsi" "$DISKIMG" create -f vmdk -o adapter_type=scsi x.vmdk 1M
expect_error "compat6 cannot be enabled with hwversion set" \
    "$DISKIMG" create -f vmdk -o compat6=on,hwversion=7 x.vmdk 1M
expect_error "cannot go into the descriptor" "$DISKIMG" create -f vmdk -o 'toolsversion=a"b' x.vmdk 1M
expect_error "Invalid parameter 'cluster_size'" "$DISKIMG" create -f vmdk -o cluster_size=4K x.vmdk 1M
expect_error "Could not open backing image 'base.vmdk': cannot open: no such file" \
    "$DISKIMG" create -f vmdk -u -b base.vmdk -F vmdk x.vmdk 1M
expect_error "too large" "$DISKIMG" create -f vmdk x.vmdk 200T
[ -e x.vmdk ] && fail "a refused create left a file"
ls -a | grep -q diskimg && fail "temporary file left behind"
exit 0
