#!/bin/bash
# streamOptimized files in the layouts seen in the wild read back exactly,
# from the file and from a pipe (probed and with -f vmdk):
#   footer - GD only at the end, header says gdOffset = -1 (ESXi, OVAs)
#   header - GD at the end, its offset in the header and in a footer
#   front  - GD and GTs at the start, grains after, EOS, no footer (VMware)
#   qemu   - GD and GTs at the start, no EOS (qemu-img)
# plus vSphere progress markers (type 4), 4 KiB grains, grains in
# descending order (fine from a file, refused from a pipe), a damaged footer
# (the markers are scanned instead), and uncompressed hosted sparse files
# with 4 KiB and 1 MiB grains.
. "$(dirname "$0")/lib.sh"
need python3
need qemu-img

cat > "$T/mkstream.py" <<'PY'
import struct, sys, zlib
src, out, layout = sys.argv[1:4]
opts = sys.argv[4:]
grain = 8 if "small-grain" in opts else 2048 if "big-grain" in opts else 128  # sectors
plain = "plain" in opts      # uncompressed hosted sparse (monolithicSparse)
gtes = 512
data = open(src, "rb").read()
cap = len(data) // 512
gb = grain * 512
ngrains = (cap + grain - 1) // grain
ngts = (ngrains + gtes - 1) // gtes
gd_sectors = (ngts * 4 + 511) // 512
gt_sectors = (gtes * 4 + 511) // 512
desc = ('# Disk DescriptorFile\nversion=1\nCID=1234abcd\nparentCID=ffffffff\n'
        'createType="streamOptimized"\n\n# Extent description\n'
        'RDONLY %d SPARSE "x.vmdk"\n\nddb.adapterType = "lsilogic"\n' % cap).encode()

def header(gd):
    h = struct.pack('<4sIIQQQQIQQQB4sH', b'KDMV', 1 if plain else 3,
                    0x3 if plain else 0x30001, cap, grain, 1, 20, gtes,
                    0, gd, overhead, 0, b'\n \r\n', 0 if plain else 1)
    return h + bytes(512 - len(h))

def marker(value, typ, extra=0):
    m = struct.pack('<QIIQ', value, 0, typ, extra)
    return m + bytes(512 - len(m))

front = layout in ("front", "qemu")
overhead = 128 if not front else -(-(21 + gd_sectors + ngts * gt_sectors) // 128) * 128
body = bytearray()
gt = [0] * (ngts * gtes)
order = list(range(ngrains))
if "descending" in opts:
    order.reverse()
for g in order:
    chunk = data[g * gb:(g + 1) * gb]
    if chunk.count(0) == len(chunk):
        continue
    if len(chunk) < gb:
        chunk += bytes(gb - len(chunk))
    if "progress" in opts and g % 3 == 0:
        body += marker(0, 4, g * grain)   # progress: the LBA after the type
    gt[g] = overhead + len(body) // 512
    if plain:
        body += chunk
        continue
    c = zlib.compress(chunk, 6)
    rec = struct.pack('<QI', g * grain, len(c)) + c
    body += rec + bytes(-len(rec) % 512)
f = bytearray()
if front:
    gd_at = 21
    gts_at = gd_at + gd_sectors
    f += header(gd_at)
    f += desc + bytes(20 * 512 - len(desc))
    f += b''.join(struct.pack('<I', gts_at + i * gt_sectors) for i in range(ngts))
    f += bytes(-len(f) % 512)
    for i in range(ngts):
        t = b''.join(struct.pack('<I', e) for e in gt[i * gtes:(i + 1) * gtes])
        f += t + bytes(gt_sectors * 512 - len(t))
    f += bytes(overhead * 512 - len(f))
    f += body
    if layout == "front" and not plain:
        f += marker(0, 0)
else:
    f += header(0xffffffffffffffff)      # patched below for "header"
    f += desc + bytes(20 * 512 - len(desc))
    f += bytes(overhead * 512 - len(f))
    f += body
    gt_at = []
    for i in range(ngts):
        f += marker(gt_sectors, 1)
        gt_at.append(len(f) // 512)
        t = b''.join(struct.pack('<I', e) for e in gt[i * gtes:(i + 1) * gtes])
        f += t + bytes(gt_sectors * 512 - len(t))
    f += marker(gd_sectors, 2)
    gd_at = len(f) // 512
    t = b''.join(struct.pack('<I', a) for a in gt_at)
    f += t + bytes(gd_sectors * 512 - len(t))
    f += marker(1, 3)
    f += header(gd_at)
    f += marker(0, 0)
    if layout == "header":
        f[0:512] = header(gd_at)
open(out, "wb").write(f)
PY

# 5 MiB + 2.5 KiB: a partial last grain
gen -s 11 -m 4K -M 256K -u 5245440 "$T/src.raw"

readback() {  # IMG LABEL: file and pipe readings equal src.raw
    local img=$1 what=$2
    rm -f "$T/out.raw"
    ok "$DISKIMG" convert -O raw "$img" "$T/out.raw"
    cmp "$T/src.raw" "$T/out.raw" || fail "$what: wrong content"
    for f in "" "-f vmdk"; do
        rm -f "$T/out.raw"
        # shellcheck disable=SC2086
        "$DISKIMG" convert $f -O raw - "$T/out.raw" < <(cat "$img") 2>"$T/err" ||
            { cat "$T/err"; fail "$what from a pipe ($f)"; }
        cmp "$T/src.raw" "$T/out.raw" || fail "$what from a pipe ($f): wrong content"
    done
}

for layout in footer header front qemu; do
    python3 "$T/mkstream.py" "$T/src.raw" "$T/$layout.vmdk" $layout || fail "mkstream $layout"
    qemu-img compare -q "$T/src.raw" "$T/$layout.vmdk" || fail "qemu-img disagrees on $layout"
    readback "$T/$layout.vmdk" "$layout layout"
done

python3 "$T/mkstream.py" "$T/src.raw" "$T/p.vmdk" footer progress small-grain || fail "mkstream"
readback "$T/p.vmdk" "progress markers, 4 KiB grains"

for g in small-grain big-grain; do
    python3 "$T/mkstream.py" "$T/src.raw" "$T/h.vmdk" front plain $g || fail "mkstream"
    qemu-img compare -q "$T/src.raw" "$T/h.vmdk" || fail "qemu-img disagrees on plain $g"
    rm -f "$T/out.raw"
    ok "$DISKIMG" convert -O raw "$T/h.vmdk" "$T/out.raw"
    cmp "$T/src.raw" "$T/out.raw" || fail "hosted sparse with $g: wrong content"
    ok "$BUILD/tools/vmdkcat" -t 2 "$T/h.vmdk" "$T/out2.raw"
    cmp "$T/src.raw" "$T/out2.raw" || fail "hosted sparse with $g, two threads: wrong content"
    rm -f "$T/out2.raw"
done
python3 "$T/mkstream.py" "$T/src.raw" "$T/fs.vmdk" front small-grain || fail "mkstream"
readback "$T/fs.vmdk" "front layout, 4 KiB grains"

# the footer damaged: the grains are found by walking the markers
python3 "$T/mkstream.py" "$T/src.raw" "$T/nf.vmdk" footer || fail "mkstream"
size=$(stat -c %s "$T/nf.vmdk")
dd if=/dev/zero of="$T/nf.vmdk" bs=512 seek=$((size / 512 - 2)) count=1 conv=notrunc status=none
readback "$T/nf.vmdk" "no valid footer"

# qemu-img's own streamOptimized output
qemu-img convert -f raw -O vmdk -o subformat=streamOptimized "$T/src.raw" "$T/q.vmdk" ||
    fail "qemu-img convert"
readback "$T/q.vmdk" "qemu-img streamOptimized"

# grains in descending order: fine from a file, refused from a pipe
python3 "$T/mkstream.py" "$T/src.raw" "$T/d.vmdk" footer descending || fail "mkstream"
rm -f "$T/out.raw"
ok "$DISKIMG" convert -O raw "$T/d.vmdk" "$T/out.raw"
cmp "$T/src.raw" "$T/out.raw" || fail "descending grains: wrong content"
expect_error 'out of order|ascending' "$DISKIMG" convert -O raw - "$T/out2.raw" < <(cat "$T/d.vmdk")
exit 0
