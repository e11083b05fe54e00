#!/usr/bin/env python3
"""Give a qcow2 image N snapshots whose L1 tables all name one table
(tests only: the refcounts are not updated).

  manysnaps.py IMG N L1_OFFSET L1_SIZE

The snapshot table is appended at the next cluster boundary.
"""
import struct
import sys

img, n, l1_off, l1_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(img, 'rb') as f:
    d = bytearray(f.read())
cs = 1 << struct.unpack('>I', d[20:24])[0]
size = struct.unpack('>Q', d[24:32])[0]
table = bytearray()
for i in range(n):
    sid = b'%d' % (i + 1)
    name = b's%d' % i
    # fixed part, then extra data: vm_state_size_large, disk_size
    e = struct.pack('>QIHHIIQII', l1_off, l1_size, len(sid), len(name), 0, 0, 0, 0, 16)
    e += struct.pack('>QQ', 0, size) + sid + name
    table += e + b'\0' * (-len(e) % 8)
off = (len(d) + cs - 1) // cs * cs
d += b'\0' * (off - len(d)) + table
struct.pack_into('>IQ', d, 60, n, off)
with open(img, 'wb') as f:
    f.write(d)
