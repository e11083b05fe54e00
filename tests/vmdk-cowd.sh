#!/bin/bash
# ESX 3 vmfsSparse deltas (COWD extents) over a vmfs (flat) parent, with
# grains of 1 and 8 sectors: the delta's grains replace the parent's, the
# rest comes from the parent.  A bare COWD file reads alone (no parent: zeros
# where unallocated); a grain table past the end of the file is refused.
. "$(dirname "$0")/lib.sh"
need python3
cd "$T" || fail "cd"

gen -s 41 -m 4K -M 256K 4M base-flat.vmdk
cat > base.vmdk <<'D'
# Disk DescriptorFile
version=1
encoding="UTF-8"
CID=11111111
parentCID=ffffffff
createType="vmfs"

# Extent description
RW 8192 VMFS "base-flat.vmdk"
D

cat > mkcowd.py <<'PY'
import random, struct, sys
base, out, want, grain = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
bad = len(sys.argv) > 5
data = bytearray(open(base, "rb").read())
cap = len(data) // 512
gtes = 4096
ngrains = (cap + grain - 1) // grain
ngts = (ngrains + gtes - 1) // gtes
gd_at = 4
gt_at = gd_at + (ngts * 4 + 511) // 512
rnd = random.Random(grain)
grains = sorted(rnd.sample(range(ngrains), min(ngrains, 300)))
gt = [0] * (ngts * gtes)
body = bytearray()
first = gt_at + ngts * 32
for g in grains:
    gt[g] = first + len(body) // 512
    blob = bytes(rnd.getrandbits(8) for _ in range(grain * 512))
    body += blob
    data[g * grain * 512:(g + 1) * grain * 512] = blob
hdr = bytearray(2048)
struct.pack_into('<4sIIIIIII', hdr, 0, b'COWD', 1, 3, cap, grain, gd_at, ngts, first + len(body) // 512)
f = bytearray(hdr)
gd = b''.join(struct.pack('<I', (0x7fffffff if bad else gt_at + 32 * i)) for i in range(ngts))
f += gd + bytes(gt_at * 512 - len(f) - len(gd))
for i in range(ngts):
    f += b''.join(struct.pack('<I', e) for e in gt[i * gtes:(i + 1) * gtes])
f += body
open(out, "wb").write(f)
open(want, "wb").write(data)
PY

for grain in 1 8; do
    python3 mkcowd.py base-flat.vmdk d$grain-delta.vmdk want$grain.raw $grain || fail "mkcowd"
    cat > d$grain.vmdk <<D
# Disk DescriptorFile
version=1
CID=22222222
parentCID=11111111
createType="vmfsSparse"
parentFileNameHint="base.vmdk"

# Extent description
RW 8192 VMFSSPARSE "d$grain-delta.vmdk"
D
    rm -f out.raw
    ok "$DISKIMG" convert -O raw d$grain.vmdk out.raw
    cmp want$grain.raw out.raw || fail "COWD delta with $grain-sector grains: wrong content"
done
"$DISKIMG" info --output=json d8.vmdk > info.json || fail "info"
grep -q '"format": "VMFSSPARSE"' info.json || fail "VMFSSPARSE extent not in info"

# the bare COWD file: only its own grains, zeros elsewhere
rm -f out.raw
ok "$DISKIMG" convert -f vmdk -O raw d8-delta.vmdk out.raw
python3 - <<'PY' || fail "bare COWD: wrong content"
import sys
a, b, w = (open(f, "rb").read() for f in ("base-flat.vmdk", "out.raw", "want8.raw"))
for i in range(0, len(w), 4096):
    got, exp = b[i:i + 4096], w[i:i + 4096]
    # a chunk the delta holds differs from the base; the others must be zeros
    ok = got == exp if exp != a[i:i + 4096] else got == bytes(4096)
    if not ok:
        sys.exit("mismatch at %d" % i)
PY

# a grain directory entry past the end of the file
python3 mkcowd.py base-flat.vmdk bad-delta.vmdk wantbad.raw 8 bad || fail "mkcowd"
sed 's/d8-delta.vmdk/bad-delta.vmdk/' d8.vmdk > bad.vmdk
expect_error 'bad-delta.vmdk: grain directory entry 0 points to a grain table at offset .*past the end' \
    "$DISKIMG" convert -O raw bad.vmdk o.raw
exit 0
