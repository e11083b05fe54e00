#!/usr/bin/env python3
"""Write a VDI for the tests, laid out from VirtualBox's VDICore.h (for what
qemu-img cannot make: version 1.0 headers, other block sizes, zero-block
entries, differencing images, blocks out of order).

  vdimake.py OUT --size BYTES [--version 1.0|1.1|0] [--type 1|2|4]
      [--block N] [--parent FILE] [--write OFF:LEN:B]... [--zero BLOCK]...
      [--reverse] [--extra N] [--header-size N] [--sector-size N]
--type 3 is an undo image (laid out as a dynamic one; readers refuse it).
--header-size: cbHeader of a 1.x header (384 to 440; default 400).
--sector-size: the header's sector size (default 512; version 0 may say 0).
--extra N puts N bytes of block extra data before each block (VDICore.h's
cbBlockExtra; VirtualBox writes 0, the reader must honour any value).
--write fills [OFF, OFF+LEN) with byte B (its blocks allocated, the rest
of them zeros); --zero marks a block 0xfffffffe (reads as zeros, even
over a parent); blocks not written or zeroed are 0xffffffff.
"""
import argparse, struct, uuid

ap = argparse.ArgumentParser()
ap.add_argument('out')
ap.add_argument('--size', type=int, required=True)
ap.add_argument('--version', default='1.1')
ap.add_argument('--type', type=int, default=1)
ap.add_argument('--block', type=int, default=1 << 20)
ap.add_argument('--parent')
ap.add_argument('--write', action='append', default=[])
ap.add_argument('--zero', action='append', type=int, default=[])
ap.add_argument('--reverse', action='store_true')
ap.add_argument('--extra', type=int, default=0)
ap.add_argument('--header-size', type=int, default=400)
ap.add_argument('--sector-size', type=int, default=512)
a = ap.parse_args()
if a.version == '0' and a.extra:
    ap.error('version 0 headers have no block extra field')
bs = a.block
n = (a.size + bs - 1) // bs
blocks = {}
for w in a.write:
    off, ln, b = w.split(':'); off, ln, b = int(off), int(ln), int(b, 0)
    pos = off
    while pos < off + ln:
        i = pos // bs
        data = blocks.setdefault(i, bytearray(bs))
        end = min(off + ln, (i + 1) * bs)
        data[pos - i * bs:end - i * bs] = bytes([b]) * (end - pos)
        pos = end
if a.type == 2:
    for i in range(n):
        blocks.setdefault(i, bytearray(bs))
order = sorted(blocks, reverse=a.reverse)
m = [0xffffffff] * n
for k, i in enumerate(order):
    m[i] = k
for z in a.zero:
    m[z] = 0xfffffffe
link = bytes(16)
if a.parent:
    p = open(a.parent, 'rb').read(512)
    ver = struct.unpack_from('<I', p, 68)[0]
    link = p[392:408] if ver >> 16 == 1 else p[372:388]
h = bytearray(512)
h[0:40] = b'<<< Oracle VM VirtualBox Disk Image >>>\n'
struct.pack_into('<II', h, 64, 0xbeda107f,
                 {'1.1': 0x10001, '1.0': 0x10000, '0': 0x00000002}[a.version])
if a.version != '0':
    off_blocks = 512
    off_data = 512 + (n * 4 + 511) // 512 * 512
    struct.pack_into('<III', h, 72, a.header_size, a.type, 0)
    struct.pack_into('<II', h, 340, off_blocks, off_data)
    struct.pack_into('<IIII', h, 348, 0, 0, 0, a.sector_size)
    struct.pack_into('<QIIII', h, 368, a.size, bs, a.extra, n, len(blocks))
    h[392:408] = uuid.uuid4().bytes; h[408:424] = uuid.uuid4().bytes; h[424:440] = link
else:
    off_blocks = 72 + 348
    off_data = off_blocks + n * 4
    struct.pack_into('<II', h, 72, a.type, 0)
    struct.pack_into('<IIII', h, 336, 0, 0, 0, a.sector_size)
    struct.pack_into('<QIII', h, 352, a.size, bs, n, len(blocks))
    h[372:388] = uuid.uuid4().bytes; h[388:404] = uuid.uuid4().bytes; h[404:420] = link
with open(a.out, 'wb') as f:
    f.write(h if a.version != '0' else h[:off_blocks])
    f.seek(off_blocks)
    f.write(b''.join(struct.pack('<I', x) for x in m))
    for k, i in enumerate(order):
        f.seek(off_data + k * (a.extra + bs))
        f.write(b'\xee' * a.extra)
        f.write(blocks[i])
    f.truncate(off_data + len(order) * (a.extra + bs))
