#!/bin/bash
# diskimg convert -O vmdk (monolithicSparse) across the options: qemu-img
# check is clean, the content reads back as the source (qemu-img compare,
# diskimg's own reader, libvmdk when installed), qemu-img info shows the
# subformat and the size, header and descriptor are qemu-img's for the same
# options (CID and file name aside), and the file is no larger than
# qemu-img's own conversion (+5%).
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3
# the system's python starts fast (a version manager's shim may not)
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
cd "$T"

gen -s 21 -m 512 -M 256K 6M src.raw
gen -s 22 -u -m 512 -M 128K 3M odd0.raw
# 2 MiB + 64 KiB + 777 bytes: not a multiple of 512 nor of the grain
head -c $((2 * 1024 * 1024 + 65536 + 777)) odd0.raw > odd.raw

# header fields and descriptor lines of A and B must agree (CID and the
# extent's file name differ by nature)
same_layout() {
    $PY - "$1" "$2" <<'PY' || fail "$1: header or descriptor differs from qemu-img's ($2)"
import struct, sys
def parse(path):
    b = open(path, 'rb').read(21 * 512)
    hdr = struct.unpack_from('<IIIQQQQIQQQ', b, 0) + (b[72:79],)
    desc = b[512:].split(b'\0')[0].decode().splitlines()
    desc = [l for l in desc if not l.startswith('CID=')]
    desc = [l.rsplit('"', 2)[0] if l.startswith('RW ') else l for l in desc]
    return hdr, desc
a, b = parse(sys.argv[1]), parse(sys.argv[2])
if a[0] != b[0]:
    sys.exit("header %r\n    vs %r" % (a[0], b[0]))
if a[1] != b[1]:
    sys.exit("descriptor %r\n    vs %r" % (a[1], b[1]))
PY
}

# libvmdk, an independent reader, when it is installed
libvmdk_reads() {   # IMG SRC
    /usr/bin/python3 -c 'import pyvmdk' 2>/dev/null || return 0
    /usr/bin/python3 - "$1" "$2" <<'PY' || fail "libvmdk reads $1 differently"
import pyvmdk, sys
h = pyvmdk.handle(); h.open(sys.argv[1]); h.open_extent_data_files()
got = h.read_buffer(h.get_media_size())
src = open(sys.argv[2], 'rb').read()
sys.exit(0 if got[:len(src)] == src and not got[len(src):].strip(b'\0') else 1)
PY
}

n=0
while read -r src opts flags; do
    [ "$opts" = - ] && opts=
    [ "$flags" = - ] && flags=
    flags=${flags//_/ }
    n=$((n + 1))
    out=out$n.vmdk ref=ref$n.vmdk
    # durable (fsync) output only where the case asks for a cache mode
    case "$flags" in *-t*) t=;; *) t="-t unsafe";; esac
    ok "$DISKIMG" convert $t $flags -O vmdk ${opts:+-o "$opts"} "$src" "$out"
    qemu-img check -q "$out" || fail "check: '$opts' $flags"
    qcompare "$src" "$out"
    qemu-img info --output=json "$out" > info.json || fail "info '$opts'"
    tr -d ' \n' < info.json | grep -q '"create-type":"monolithicSparse"' ||
        fail "'$opts': info lacks the subformat"
    size=$(stat -c %s "$src")
    tr -d ' \n' < info.json | grep -q "\"virtual-size\":$(( (size + 511) / 512 * 512 ))," ||
        fail "'$opts': info has the wrong size"
    ok "$DISKIMG" convert -t unsafe -O raw "$out" back.raw
    cmp -n "$size" "$src" back.raw || fail "'$opts' $flags: our reader reads it differently"
    [ "$(stat -c %s back.raw)" = $(( (size + 511) / 512 * 512 )) ] || fail "read-back size"
    libvmdk_reads "$out" "$src"
    qemu-img convert $flags -O vmdk ${opts:+-o "$opts"} "$src" "$ref" || fail "qemu-img convert $opts"
    same_layout "$out" "$ref"
    ours=$(stat -c %s "$out") theirs=$(stat -c %s "$ref")
    [ "$ours" -le $((theirs + theirs / 20)) ] || fail "'$opts' $flags: $ours bytes, qemu-img makes $theirs"
    [ "$(alloc "$out")" -le $(( $(alloc "$ref") + $(alloc "$ref") / 20 + 8192 )) ] ||
        fail "'$opts' $flags: $(alloc "$out") bytes allocated, qemu-img $(alloc "$ref")"
    rm -f "$out" "$ref" back.raw
done <<'CASES'
src.raw - -
src.raw zeroed_grain=on -
src.raw compat6=on,adapter_type=lsilogic -
src.raw hwversion=14,adapter_type=buslogic,toolsversion=10346 -W
src.raw adapter_type=legacyESX -c
src.raw - -S_0
src.raw - -t_none
src.raw - -t_writeback
odd.raw - -
odd.raw subformat=monolithicSparse -W
CASES
exit 0
