#!/usr/bin/env python3
"""Write a VHD for the tests, laid out from the specification (for what
qemu-img cannot make: differencing disks, partial sector bitmaps, parent
locators, other creators, odd block sizes).

  vhdmake.py OUT --type fixed|dynamic|diff --size BYTES [options]
    --block N           block size (dynamic, diff; default 2 MiB)
    --creator XXXX      creator app (default 'win '; backslash escapes: 'tap\0')
    --chs C,H,S|auto    the footer's CHS geometry (default 65535,16,255, the
                        maximum, which every reader sizes by current size;
                        auto: the specification's geometry for the size)
    --footer-type N     the disk type stored in the footers (layout by --type)
    --damage WHAT       footer-sum, footer-cookie, copy-sum, copy-size (a stale
                        copy at 0 naming another size), header-sum (repeatable)
    --parent FILE       the parent (diff): its unique id goes into the header
    --loc CODE:PATH     a parent locator (W2ru, W2ku, MacX; repeatable)
    --parent-name NAME  the header's parent name (UTF-16BE)
    --write OFF:LEN:B   sectors [OFF, OFF+LEN) hold byte B and have their bit set
                        (OFF, LEN multiples of 512); the rest of an allocated
                        block holds 0xEE garbage with its bits clear
    --no-copy           no footer copy at offset 0
    --reverse           allocate blocks last guest block first
"""
import argparse, codecs, os, struct, sys, uuid

def checksum(b, skip):
    s = sum(b[:skip]) + sum(b[skip + 4:])
    return (~s) & 0xffffffff

def geometry(sectors):
    """The specification's CHS geometry for a disk of `sectors`."""
    sectors = min(sectors, 65535 * 16 * 255)
    if sectors >= 65535 * 16 * 63:
        s, h = 255, 16
        cth = sectors // s
    else:
        s = 17
        cth = sectors // s
        h = max((cth + 1023) // 1024, 4)
        if cth >= h * 1024 or h > 16:
            s, h = 31, 16
            cth = sectors // s
        if cth >= h * 1024:
            s, h = 63, 16
            cth = sectors // s
    return cth // h, h, s

def footer(kind, size, creator, uid, data_offset, chs=(65535, 16, 255), ftype=None):
    t = {'fixed': 2, 'dynamic': 3, 'diff': 4}[kind] if ftype is None else ftype
    b = bytearray(512)
    b[0:8] = b'conectix'
    struct.pack_into('>IIQI', b, 8, 2, 0x10000, data_offset, 0x2a000000)
    b[28:32] = creator
    struct.pack_into('>II', b, 32, 0x000a0000, 0x5769326b)
    struct.pack_into('>QQ', b, 40, size, size)
    struct.pack_into('>HBBI', b, 56, chs[0], chs[1], chs[2], t)
    b[68:84] = uid
    struct.pack_into('>I', b, 64, checksum(b, 64))
    return bytes(b)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--type', required=True)
    ap.add_argument('--size', type=int, required=True)
    ap.add_argument('--block', type=int, default=2 << 20)
    ap.add_argument('--creator', default='win ')
    ap.add_argument('--parent')
    ap.add_argument('--loc', action='append', default=[])
    ap.add_argument('--parent-name', default='')
    ap.add_argument('--write', action='append', default=[])
    ap.add_argument('--no-copy', action='store_true')
    ap.add_argument('--reverse', action='store_true')
    ap.add_argument('--chs')
    ap.add_argument('--footer-type', type=int)
    ap.add_argument('--damage', action='append', default=[],
                    choices=['footer-sum', 'footer-cookie', 'copy-sum', 'copy-size',
                             'header-sum'])
    a = ap.parse_args()
    creator = codecs.decode(a.creator, 'unicode_escape').encode('latin-1').ljust(4, b' ')[:4]
    chs = (65535, 16, 255)
    if a.chs == 'auto':
        chs = geometry(a.size // 512)
    elif a.chs:
        chs = tuple(int(x) for x in a.chs.split(','))
    def foot(kind, data_offset, which):
        b = bytearray(footer(kind, a.size, creator, uid, data_offset, chs, a.footer_type))
        if which == 'copy' and 'copy-size' in a.damage:
            b[:] = footer(kind, a.size + 512, creator, uid, data_offset, chs, a.footer_type)
        if which + '-sum' in a.damage:
            b[64 + 3] ^= 1
        if which + '-cookie' in a.damage:
            b[0:8] = b'conectiX'
        return bytes(b)
    uid = uuid.uuid4().bytes
    writes = []
    for w in a.write:
        off, ln, byte = w.split(':')
        writes.append((int(off), int(ln), int(byte, 0)))
    if a.type == 'fixed':
        disk = bytearray(a.size)
        for off, ln, byte in writes:
            disk[off:off + ln] = bytes([byte]) * ln
        with open(a.out, 'wb') as f:
            f.write(disk)
            f.write(foot('fixed', 0xffffffffffffffff, 'footer'))
        return
    bs = a.block
    nblocks = (a.size + bs - 1) // bs
    bm_bytes = ((bs // 512 + 7) // 8 + 511) // 512 * 512
    # blocks touched by writes
    blocks = {}
    for off, ln, byte in writes:
        for s in range(off // 512, (off + ln) // 512):
            b = s * 512 // bs
            blk = blocks.setdefault(b, [bytearray(bm_bytes), bytearray(b'\xee' * bs)])
            i = s - b * bs // 512
            blk[0][i // 8] |= 0x80 >> (i % 8)
            blk[1][i * 512:(i + 1) * 512] = bytes([byte]) * 512
    hdr_off = 512
    bat_off = hdr_off + 1024
    bat_bytes = (nblocks * 4 + 511) // 512 * 512
    pos = bat_off + bat_bytes
    # locators
    locs = []
    for l in a.loc:
        code, path = l.split(':', 1)
        data = path.encode('utf-16-le') if code in ('W2ru', 'W2ku') else path.encode()
        space = (len(data) + 511) // 512 * 512
        locs.append((code.encode(), space, len(data), pos, data))
        pos += space
    order = sorted(blocks, reverse=a.reverse)
    bat = [0xffffffff] * nblocks
    for b in order:
        bat[b] = pos // 512
        pos += bm_bytes + bs
    h = bytearray(1024)
    h[0:8] = b'cxsparse'
    struct.pack_into('>QQIII', h, 8, 0xffffffffffffffff, bat_off, 0x10000, nblocks, bs)
    if a.parent:
        with open(a.parent, 'rb') as p:
            p.seek(-512, 2)
            h[40:56] = p.read(512)[68:84]
    name = a.parent_name.encode('utf-16-be')
    h[64:64 + len(name)] = name
    for i, (code, space, ln, off, data) in enumerate(locs):
        struct.pack_into('>4sIIIQ', h, 576 + 24 * i, code, space, ln, 0, off)
    struct.pack_into('>I', h, 36, checksum(h, 36) ^ ('header-sum' in a.damage))
    ft = foot(a.type, hdr_off, 'footer')
    with open(a.out, 'wb') as f:
        f.write(bytes(512) if a.no_copy else foot(a.type, hdr_off, 'copy'))
        f.write(h)
        f.write(b''.join(struct.pack('>I', x) for x in bat).ljust(bat_bytes, b'\xff'))
        for code, space, ln, off, data in locs:
            f.seek(off)
            f.write(data.ljust(space, b'\0'))
        for b in order:
            f.seek(bat[b] * 512)
            f.write(blocks[b][0])
            f.write(blocks[b][1])
        f.seek(pos)
        f.write(ft)

main()
