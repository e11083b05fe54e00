#!/bin/bash
# diskimg convert -O vmdk -o subformat=streamOptimized, to a file and down a
# pipe: VMware's stream layout, checked record by record by an independent
# walker (header with gdOffset "at the end", grains in LBA order whose zlib
# streams inflate to the source's bytes, a GT marker after each table's
# grains, GD marker, footer holding the directory's offset, end-of-stream
# last); qemu-img check, compare and info; diskimg reads it back at random
# and as a stream; libvmdk when installed; no larger than qemu-img's (+5%).
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
cd "$T"

gen -s 41 -m 512 -M 256K 6M src.raw
gen -s 42 -u -m 512 -M 128K 3M odd0.raw
head -c $((2 * 1024 * 1024 + 65536 + 777)) odd0.raw > odd.raw
head -c $((3 * 1024 * 1024)) /dev/urandom > random.raw
truncate -s 1M zero.raw

# walk IMG against SRC [PIPE]: every record of the stream layout
walk() {
    $PY - "$@" <<'PY' || fail "stream layout of $1"
import struct, sys, zlib
img, src = sys.argv[1], sys.argv[2]
pipe = len(sys.argv) > 3
b = open(img, 'rb').read()
s = open(src, 'rb').read()
S = 512
def hdr(off):
    return struct.unpack_from('<IIIQQQQIQQQ', b, off) + (b[off + 72:off + 79],)
h = hdr(0)
magic, ver, flags, cap, grain, do, ds, gtes, rgd, gd, oh, tail = h
assert magic == 0x564d444b and ver == 3, h
assert flags & ~4 == 0x30001, "flags %#x" % flags
assert cap == (len(s) + S - 1) // S and grain == 128 and gtes == 512, h
assert (do, ds, rgd, gd, oh) == (1, 20, 0, 2**64 - 1, 128), h
assert tail == b'\0\n \r\n\x01\0', tail
desc = b[S:21 * S].split(b'\0')[0].decode()
assert 'createType="streamOptimized"' in desc, desc
name = 'disk.vmdk' if pipe else img
assert 'RW %d SPARSE "%s"\n' % (cap, name) in desc, desc
if pipe:
    assert not b[21 * S:128 * S].strip(b'\0'), "overhead not zeros"
pos, last_lba, gts, grains, gt_of = 128 * S, -1, {}, {}, {}
cur_gt = None
ngt = (cap + 128 * 512 - 1) // (128 * 512)
while True:
    lba, size = struct.unpack_from('<QI', b, pos)
    if size:
        assert lba % 128 == 0 and lba > last_lba and lba < cap, (pos, lba)
        g = lba // 128
        if cur_gt is not None:
            assert g // 512 >= cur_gt, "grain %d after table %d" % (g, cur_gt)
        data = zlib.decompress(b[pos + 12:pos + 12 + size])
        want = s[lba * S:lba * S + len(data)]
        want += b'\0' * (len(data) - len(want))
        assert data == want, "grain at LBA %d" % lba
        assert len(data) == min(128 * S, cap * S - lba * S), (lba, len(data))
        assert not b[pos + 12 + size:(pos + 12 + size + S - 1) // S * S].strip(b'\0')
        grains[g] = pos // S
        last_lba = lba
        pos = (pos + 12 + size + S - 1) // S * S
        continue
    typ = struct.unpack_from('<I', b, pos + 12)[0]
    assert not b[pos + 16:pos + S].strip(b'\0'), "marker padding"
    body = pos + S
    if typ == 1:
        assert lba == 4
        t = max(g for g in grains) // 512
        assert t not in gts, "table %d twice" % t
        ent = struct.unpack_from('<512I', b, body)
        for i, e in enumerate(ent):
            assert e == grains.get(t * 512 + i, 0), "table %d entry %d" % (t, i)
        gts[t] = body // S
        cur_gt = t + 1
    elif typ == 2:
        assert lba == (ngt * 4 + S - 1) // S, lba
        gd_sector = body // S
        ent = struct.unpack_from('<%dI' % ngt, b, body)
        assert list(ent) == [gts.get(i, 0) for i in range(ngt)], "directory"
        assert set(g // 512 for g in grains) == set(gts), "tables vs grains"
    elif typ == 3:
        assert lba == 1
        f = hdr(body)
        assert f[:9] == h[:9] and f[10:] == h[10:] and f[9] == gd_sector, (f, h)
    elif typ == 0:
        assert lba == 0 and pos + S == len(b), "EOS is not the last sector"
        break
    else:
        raise AssertionError("marker type %d" % typ)
    pos = body + lba * S
PY
}

libvmdk_reads() {   # IMG SRC
    $PY -c 'import pyvmdk' 2>/dev/null || return 0
    $PY - "$1" "$2" <<'PY' || fail "libvmdk reads $1 differently"
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
    out=out$n.vmdk ref=ref$n.vmdk o=subformat=streamOptimized${opts:+,$opts}
    ok "$DISKIMG" convert -t unsafe $flags -O vmdk -o "$o" "$src" "$out"
    walk "$out" "$src"
    qemu-img check -q "$out" || fail "check: '$o' $flags"
    qcompare "$src" "$out"
    qemu-img info --output=json "$out" | tr -d ' \n' | grep -q '"create-type":"streamOptimized"' ||
        fail "'$o': info lacks the subformat"
    size=$(stat -c %s "$src")
    ok "$DISKIMG" convert -t unsafe -O raw "$out" back.raw
    cmp -n "$size" "$src" back.raw || fail "'$o' $flags: our reader reads it differently"
    libvmdk_reads "$out" "$src"
    qemu-img convert $flags -O vmdk -o "$o" "$src" "$ref" || fail "qemu-img convert $o"
    ours=$(stat -c %s "$out") theirs=$(stat -c %s "$ref")
    [ "$ours" -le $((theirs + theirs / 20)) ] || fail "'$o' $flags: $ours bytes, qemu-img makes $theirs"
    rm -f "$ref" back.raw
done <<'CASES'
src.raw - -
src.raw zeroed_grain=on,adapter_type=lsilogic,hwversion=14 -
src.raw - -W_-m_2
src.raw - -c
src.raw - -S_0
odd.raw - -
random.raw - -
zero.raw - -
CASES

# down a pipe: the same records after the descriptor (which names the
# extent disk.vmdk); read back from the pipe by diskimg
"$DISKIMG" convert -O vmdk -o subformat=streamOptimized src.raw - | cat > pipe.vmdk ||
    fail "convert to a pipe"
walk pipe.vmdk src.raw pipe
cmp <(tail -c +$((21 * 512 + 1)) pipe.vmdk) <(tail -c +$((21 * 512 + 1)) out1.vmdk) ||
    fail "pipe output differs from file output"
qcompare src.raw pipe.vmdk
"$DISKIMG" convert -O vmdk -o subformat=streamOptimized odd.raw - |
    "$DISKIMG" convert -f vmdk - odd.back || fail "pipe to pipe"
cmp -n "$(stat -c %s odd.raw)" odd.raw odd.back || fail "pipe to pipe: content"

# a large, nearly empty disk: the zero ranges are never read or written
truncate -s 200G big.raw
printf 'grain at 100 GiB' | dd of=big.raw bs=1 seek=$((100 << 30)) conv=notrunc status=none
ok "$DISKIMG" convert -O vmdk -o subformat=streamOptimized big.raw big.vmdk
[ "$(stat -c %s big.vmdk)" -lt $((200 * 1024)) ] || fail "200 GiB sparse disk: $(stat -c %s big.vmdk) bytes"
"$BUILD/tools/vmdkcat" -m big.vmdk > map || fail "map big.vmdk"
[ "$(grep -c data map)" = 1 ] && grep -q "^107374182400 65536 data allocated compressed" map ||
    { cat map; fail "200 GiB sparse disk: allocation"; }
qemu-io -r -f vmdk -c "read -v $((100 << 30)) 16" -c "read -P 0 $(((100 << 30) + 16)) 65520" \
    big.vmdk > io.txt || fail "qemu-io big.vmdk"
grep -q "grain.at.100.GiB" io.txt && ! grep -q "verification failed" io.txt ||
    { cat io.txt; fail "200 GiB sparse disk: content"; }

# a vmdk subformat that cannot go down a pipe says so (qcow2 and raw can:
# convert-qcow2-to-pipe.sh)
expect_error "needs a regular file.*subformat=streamOptimized" \
    bash -o pipefail -c "'$DISKIMG' convert -O vmdk src.raw - | cat >/dev/null"
# a failed write leaves nothing behind
DISKIMG_FAULT=write:3:ENOSPC expect_error "No space left" \
    "$DISKIMG" convert -O vmdk -o subformat=streamOptimized src.raw fail.vmdk
ls -a | grep -q 'fail.vmdk' && fail "a failed conversion left a file"
exit 0
