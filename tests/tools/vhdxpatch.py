#!/usr/bin/env python3
"""Change fields of a VHDX in place and make its checksums right again
(for the tests: damaged and hostile images from good ones).

  vhdxpatch.py FILE EDIT...
    hdr.N.FIELD=V    header N (1, 2 or both): seq, version, log_version,
                     log_length, log_offset (numbers), log_guid (zero, or
                     new: a random one), data_guid (new)
    rt.N.count=V     region table N (1, 2, both): entry count
    rt.N.E.FIELD=V   entry E: off, len, required, guid (text)
    bat.I=V          BAT entry I (the BAT region of region table 1), a number
    meta.E.FIELD=V   metadata table entry E: off, len, flags
    item.GUID=HEX    the bytes of the metadata item GUID (its first bytes)
    raw.OFF=HEX      bytes at OFF
    bad.hdr.N        damage header N's checksum (a byte of its reserved part)
"""
import os, struct, sys, uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vhdxmake import crc32c

KiB = 1024

def num(v):
    return int(v, 0)

def fix(f, off, n):
    f.seek(off)
    b = bytearray(f.read(n))
    b[4:8] = b'\0' * 4
    struct.pack_into('<I', b, 4, crc32c(b))
    f.seek(off)
    f.write(b)

def which(n, offs):
    return offs if n == 'both' else [offs[int(n) - 1]]

def main():
    path = sys.argv[1]
    f = open(path, 'r+b')
    f.seek(192 * KiB)
    rt = f.read(64 * KiB)
    cnt = struct.unpack_from('<I', rt, 8)[0]
    bat_off = meta_off = None
    for i in range(min(cnt, 2047)):
        g, off, ln, req = struct.unpack_from('<16sQII', rt, 16 + 32 * i)
        if g == uuid.UUID('2dc27766-f623-4200-9d64-115e9bfd4a08').bytes_le:
            bat_off = off
        if g == uuid.UUID('8b7ca206-4790-4b9a-b8fe-575f050f886e').bytes_le:
            meta_off = off
    for edit in sys.argv[2:]:
        key, _, val = edit.partition('=')
        k = key.split('.')
        if k[0] == 'hdr':
            fields = {'seq': (8, '<Q'), 'version': (66, '<H'), 'log_version': (64, '<H'),
                      'log_length': (68, '<I'), 'log_offset': (72, '<Q')}
            for base in which(k[1], [64 * KiB, 128 * KiB]):
                if k[2] in fields:
                    o, fmt = fields[k[2]]
                    f.seek(base + o)
                    f.write(struct.pack(fmt, num(val)))
                else:
                    o = {'log_guid': 48, 'data_guid': 32}[k[2]]
                    f.seek(base + o)
                    f.write(b'\0' * 16 if val == 'zero' else uuid.uuid4().bytes_le)
                fix(f, base, 4096)
        elif k[0] == 'rt':
            for base in which(k[1], [192 * KiB, 256 * KiB]):
                if k[2] == 'count':
                    f.seek(base + 8)
                    f.write(struct.pack('<I', num(val)))
                else:
                    e = base + 16 + 32 * int(k[2])
                    if k[3] == 'guid':
                        f.seek(e)
                        f.write(uuid.UUID(val).bytes_le)
                    else:
                        o, fmt = {'off': (16, '<Q'), 'len': (24, '<I'),
                                  'required': (28, '<I')}[k[3]]
                        f.seek(e + o)
                        f.write(struct.pack(fmt, num(val)))
                fix(f, base, 64 * KiB)
        elif k[0] == 'bat':
            f.seek(bat_off + 8 * int(k[1]))
            f.write(struct.pack('<Q', num(val)))
        elif k[0] == 'meta':
            o, fmt = {'off': (16, '<I'), 'len': (20, '<I'), 'flags': (24, '<I')}[k[2]]
            f.seek(meta_off + 32 + 32 * int(k[1]) + o)
            f.write(struct.pack(fmt, num(val)))
        elif k[0] == 'item':
            g = uuid.UUID(k[1]).bytes_le
            f.seek(meta_off)
            mt = f.read(64 * KiB)
            n = struct.unpack_from('<H', mt, 10)[0]
            for i in range(n):
                ig, io = struct.unpack_from('<16sI', mt, 32 + 32 * i)
                if ig == g:
                    f.seek(meta_off + io)
                    f.write(bytes.fromhex(val))
                    break
            else:
                sys.exit('no item ' + k[1])
        elif k[0] == 'raw':
            f.seek(num(k[1]))
            f.write(bytes.fromhex(val))
        elif k[0] == 'bad' and k[1] == 'hdr':
            for base in which(k[2], [64 * KiB, 128 * KiB]):
                f.seek(base + 2000)
                b = f.read(1)
                f.seek(base + 2000)
                f.write(bytes([b[0] ^ 0xff]))
        else:
            sys.exit('unknown edit ' + edit)

if __name__ == '__main__':
    main()
