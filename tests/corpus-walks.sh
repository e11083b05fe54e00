#!/bin/bash
# Small images that claim a huge, nearly empty disk through their tables.
# Walking them must cost time in proportion to the file, not to the virtual
# size: each command must finish within 10 s (they took minutes to hours
# before the fixes):
#   - a qcow2 with 2 MiB clusters whose 65536 L1 entries all name one empty
#     L2 table (32 PiB, 2^34 L2 entries to decode one by one);
#   - a streamOptimized vmdk without grain directory or usable footer
#     (grains found by scanning markers) claiming 128 TiB (2^31 grains to
#     look up);
#   - a hosted sparse vmdk whose grain directory names one grain table twice
#     (refused: no tool writes that, and a 16 MiB directory naming one table
#     4M times would read it 4M times).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

# in10 CMD...: must succeed within 10 s
in10() {
    timeout -s KILL 10 "$@" >"$T/out" 2>"$T/err" || { cat "$T/err" >&2; fail "failed or took more than 10 s: $*"; }
}

# --- qcow2: one empty L2 table named by every L1 entry
qemu-img create -q -f qcow2 -o cluster_size=2M q.qcow2 32P
qemu-io -f qcow2 -c 'write -P 0x61 0 4K' q.qcow2 >/dev/null
L1=$(peek64 q.qcow2 40)
NL1=$(peek32 q.qcow2 36)
[ "$NL1" = 65536 ] || fail "expected 65536 L1 entries, got $NL1"
E=$(peek64 q.qcow2 "$L1")
L2=$(( E & 0x00fffffffffffe00 ))
poke q.qcow2 "$L2" 0000000000000000            # the L2 table is now empty
poke q.qcow2 "$L1" "$(be64 "$E")"
# 65536 copies of the L1 entry, by doubling
poke e1 0 "$(be64 "$E")"
for ((i = 0; i < 16; i++)); do cat e1 e1 > e2; mv e2 e1; done
dd if=e1 of=q.qcow2 bs=64K seek=$((L1 / 65536)) conv=notrunc status=none
[ $((L1 % 65536)) = 0 ] || fail "L1 table not 64K-aligned"
in10 "$BDREAD" q.qcow2 -m
grep -q "^extents 1 " "$T/out" || { cat "$T/out"; fail "qcow2: expected one extent"; }
in10 "$DISKIMG" convert -O qcow2 -o cluster_size=2M q.qcow2 out.qcow2
[ "$(qemu-img info --output=json out.qcow2 | grep -c '"virtual-size": 36028797018963968')" = 1 ] ||
    fail "qcow2: output size"
[ "$(alloc out.qcow2)" -lt $((16 << 20)) ] || fail "qcow2: output holds data"
rm -f out.qcow2
# check refuses to walk 2^34 entries, after 2^28 (1-2 s; ASan is slower)
limit=10
grep -q __asan_init "$DISKIMG" && limit=60
rc=0
timeout -s KILL $limit "$DISKIMG" check q.qcow2 >"$T/out" 2>"$T/err" || rc=$?
[ $rc = 1 ] || { cat "$T/err" >&2; fail "qcow2 check: exit $rc"; }
grep -q "q.qcow2: the image.s tables name more than [0-9]* table entries in all" "$T/err" ||
    { cat "$T/err" >&2; fail "qcow2 check: message"; }

# --- vmdk: a stream without grain directory, claiming 128 TiB
gen -s 21 -m 4K -M 64K 1M s.raw
qemu-img convert -q -f raw -O vmdk -o subformat=streamOptimized s.raw s.vmdk
# gdOffset = -1 (GD at the end) and no footer at the end of the file (a
# footer marker in place of qemu's end-of-stream marker, the zero padding
# after it): grains are found by scanning the markers
poke s.vmdk 56 ffffffffffffffff
python3 - s.vmdk <<'PY' || fail "footer marker"
import struct, sys
f = open(sys.argv[1], "r+b")
b = f.read()
pos = struct.unpack_from("<Q", b, 64)[0] * 512
while struct.unpack_from("<I", b, pos + 8)[0]:     # grains: to the end-of-stream marker
    pos += (12 + struct.unpack_from("<I", b, pos + 8)[0] + 511) // 512 * 512
assert b[pos:pos + 1536] == bytes(1536)
f.seek(pos)
f.write(struct.pack("<QII", 1, 0, 3))
PY
cp s.vmdk s1m.vmdk
in10 "$DISKIMG" convert -O raw s1m.vmdk s1m.raw
cmp s.raw s1m.raw || fail "vmdk scanned: content differs"
poke s.vmdk 12 "$(printf '%016x' $((1 << 38)) | sed 's/\(..\)/\1 /g' | awk '{for (i = NF; i > 0; i--) printf "%s", $i}')"
in10 "$BDREAD" s.vmdk -m
in10 "$DISKIMG" convert -O qcow2 s.vmdk out.qcow2
[ "$("$DISKIMG" info --output=json out.qcow2 | grep -c '"virtual-size": 140737488355328')" = 1 ] ||
    fail "vmdk: output size"
# the first MiB is the data
"$DISKIMG" convert -O raw -f qcow2 out.qcow2 - 2>/dev/null | head -c 1M | cmp - s.raw ||
    fail "vmdk 128 TiB: first MiB differs"
rm -f out.qcow2

# --- vmdk: a grain directory naming one grain table twice
qemu-img create -q -f vmdk -o subformat=monolithicSparse d.vmdk 64M
qemu-io -f vmdk -c 'write -P 0x62 0 64K' -c 'write -P 0x63 40M 64K' d.vmdk >/dev/null
"$DISKIMG" convert -O raw d.vmdk good.raw || fail "vmdk: clean conversion"
# the primary directory alone: repaired from the redundant one (a warning)
GD=$(( $(od -v -A n -t u4 -j 56 -N 4 d.vmdk) * 512 ))
RGD=$(( $(od -v -A n -t u4 -j 48 -N 4 d.vmdk) * 512 ))
cp d.vmdk d1.vmdk
poke d1.vmdk $((GD + 4)) "$(od -v -A n -t x1 -j "$GD" -N 4 d.vmdk | tr -d ' \n')"
in10 "$DISKIMG" convert -O raw d1.vmdk d1.raw
grep -q "d1.vmdk: primary grain directory is damaged; using the redundant one" "$T/err" ||
    { cat "$T/err" >&2; fail "vmdk: no warning"; }
cmp d1.raw good.raw || fail "vmdk: repaired content differs"
# both directories: refused
cp d1.vmdk d2.vmdk
poke d2.vmdk $((RGD + 4)) "$(od -v -A n -t x1 -j "$RGD" -N 4 d.vmdk | tr -d ' \n')"
expect_error "d2.vmdk: grain directory entries 0 and 1 both point to the grain table at offset [0-9]+" \
    timeout -s KILL 10 "$DISKIMG" convert -O raw d2.vmdk d2.raw
[ -e d2.raw ] && fail "vmdk: output left"
exit 0
