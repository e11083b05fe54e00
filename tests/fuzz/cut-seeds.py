#!/usr/bin/env python3
"""Copies of a VHD or VDI cut at each of its structure boundaries, for the
fuzzers' seeds: a reader must refuse each or read it as it read the whole.

  cut-seeds.py IMAGE OUTDIR

Writes OUTDIR/<name>-cut-<bytes>.<ext> for each cut: for a VHD, the end of
the footer copy, the middle and end of the dynamic header, of the BAT and
of each parent locator, and for each allocated block the end of its
bitmap, the middle and end of its data; for a VDI, the end of the header,
the middle and end of the block map, the start of the data, and for each
block the end of its extra data, the middle and end of its data; for
both, just before the last footer or sector, and one byte short.
"""
import os, struct, sys


def vhd_cuts(b):
    n = len(b)
    ft = b[n - 512:]
    cuts = {n - 512, n - 1}
    if struct.unpack_from('>I', ft, 60)[0] == 2:          # fixed
        cuts.add((n - 512) // 1024 * 512)
        return cuts
    hdr = struct.unpack_from('>Q', ft, 16)[0]
    cuts |= {512, hdr + 512, hdr + 1024}
    h = b[hdr:hdr + 1024]
    table, _, entries, bs = struct.unpack_from('>QIII', h, 16)
    bat_bytes = (entries * 4 + 511) // 512 * 512
    cuts |= {table + bat_bytes // 2 // 4 * 4, table + bat_bytes}
    for i in range(8):
        code, space, length, _, off = struct.unpack_from('>4sIIIQ', h, 576 + 24 * i)
        if code != bytes(4) and length:
            cuts |= {off, off + length // 2, off + (length + 511) // 512 * 512}
    bm = ((bs // 512 + 7) // 8 + 511) // 512 * 512
    for i in range(entries):
        s = struct.unpack_from('>I', b, table + 4 * i)[0]
        if s != 0xffffffff:
            cuts |= {s * 512 + bm, s * 512 + bm + bs // 2, s * 512 + bm + bs}
    return cuts


def vdi_cuts(b):
    n = len(b)
    ver = struct.unpack_from('<I', b, 68)[0]
    if ver >> 16 == 0:
        hsize = 348
        bs, blocks = struct.unpack_from('<II', b, 360)
        extra = 0
        off_blocks = 72 + 348
        off_data = off_blocks + blocks * 4
    else:
        hsize = struct.unpack_from('<I', b, 72)[0]
        off_blocks, off_data = struct.unpack_from('<II', b, 340)
        bs, extra, blocks = struct.unpack_from('<III', b, 376)
    cuts = {72 + hsize, 512, off_blocks + blocks * 2 // 4 * 4, off_blocks + blocks * 4,
            off_data, n - 512, n - 1}
    for i in range(blocks):
        e = struct.unpack_from('<I', b, off_blocks + 4 * i)[0]
        if e < 0xfffffffe:
            start = off_data + e * (extra + bs)
            cuts |= {start + extra, start + extra + bs // 2, start + extra + bs}
    return cuts


def main():
    src, out = sys.argv[1], sys.argv[2]
    b = open(src, 'rb').read()
    name, ext = os.path.splitext(os.path.basename(src))
    cuts = vdi_cuts(b) if ext == '.vdi' else vhd_cuts(b)
    for c in sorted(cuts):
        if 0 < c < len(b):
            with open(os.path.join(out, '%s-cut-%d%s' % (name, c, ext)), 'wb') as f:
                f.write(b[:c])


main()
