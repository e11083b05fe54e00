#!/usr/bin/env python3
"""Edit the bitmap directory of a qcow2 image (tests only).

  bitmaps.py IMG show                      offset and size of the directory
  bitmaps.py IMG set I FIELD VALUE         change a field of entry I
  bitmaps.py IMG clone N [GRAN [TOFF TSIZE]]
                                           make the directory N copies of
                                           entry 0 (names b0..bN-1), placed
                                           after the end of the file, with
                                           that granularity and table
FIELD: table_offset table_size flags type gran name_size extra name
"""
import struct
import sys

FIELDS = {'table_offset': (0, '>Q'), 'table_size': (8, '>I'), 'flags': (12, '>I'),
          'type': (16, '>B'), 'gran': (17, '>B'), 'name_size': (18, '>H'),
          'extra': (20, '>I')}
EXT_BITMAPS = 0x23852875


def ext_offset(d):
    """Offset of the bitmaps extension's data."""
    off = struct.unpack('>I', d[100:104])[0]
    while True:
        t, n = struct.unpack('>II', d[off:off + 8])
        if t == 0:
            sys.exit('no bitmaps extension')
        if t == EXT_BITMAPS:
            return off + 8
        off += 8 + (n + 7) // 8 * 8


def entries(d, doff, dsize):
    out, p = [], doff
    while p < doff + dsize:
        name_size, extra = struct.unpack('>HI', d[p + 18:p + 24])
        out.append(p)
        p += (24 + extra + name_size + 7) // 8 * 8
    return out


def main():
    img, cmd = sys.argv[1], sys.argv[2]
    with open(img, 'rb') as f:
        d = bytearray(f.read())
    x = ext_offset(d)
    nb, _, dsize, doff = struct.unpack('>IIQQ', d[x:x + 24])
    if cmd == 'show':
        print(doff, dsize)
        return
    if cmd == 'set':
        i, field, value = int(sys.argv[3]), sys.argv[4], sys.argv[5]
        p = entries(d, doff, dsize)[i]
        if field == 'name':
            n = struct.unpack('>H', d[p + 18:p + 20])[0]
            extra = struct.unpack('>I', d[p + 20:p + 24])[0]
            d[p + 24 + extra:p + 24 + extra + n] = value.encode()[:n].ljust(n, b'\0')
        else:
            o, fmt = FIELDS[field]
            struct.pack_into(fmt, d, p + o, int(value, 0))
    elif cmd == 'clone':
        n = int(sys.argv[3])
        p = entries(d, doff, dsize)[0]
        fixed = bytearray(d[p:p + 24])
        if len(sys.argv) > 4:
            fixed[17] = int(sys.argv[4])
        if len(sys.argv) > 6:
            struct.pack_into('>QI', fixed, 0, int(sys.argv[5], 0), int(sys.argv[6], 0))
        new = bytearray()
        for i in range(n):
            name = b'b%d' % i
            struct.pack_into('>HI', fixed, 18, len(name), 0)
            e = fixed + name
            new += e + b'\0' * (-len(e) % 8)
        cs = 1 << struct.unpack('>I', d[20:24])[0]
        doff = (len(d) + cs - 1) // cs * cs
        d += b'\0' * (doff - len(d)) + new
        struct.pack_into('>IIQQ', d, x, n, 0, len(new), doff)
    with open(img, 'wb') as f:
        f.write(d)


main()
