#!/usr/bin/env python3
"""Damaged copies of qcow2 images, seeds for the repair and resize fuzz
targets (make-seeds.sh): each a state `check -r` must repair or refuse and
`resize` must refuse or handle.

    make-qcow2-damaged.py OUTDIR IMAGE...   -> OUTDIR/<image>-<damage>.qcow2

Damages: a leaked cluster past the data, a used cluster with refcount 0,
refcount 2 on a cluster with one reference, a refcount block outside the
file (a little, and so far that its end wraps), the L1 entry's copied flag
cleared, and every compressed entry made to span three host clusters.
"""
import os
import struct
import sys


def be64(b, off):
    return struct.unpack_from('>Q', b, off)[0]


class Image:
    def __init__(self, data):
        self.b = bytearray(data)
        self.cb = struct.unpack_from('>I', self.b, 20)[0]
        self.cs = 1 << self.cb
        self.l1 = be64(self.b, 40)
        self.reft = be64(self.b, 48)
        version = struct.unpack_from('>I', self.b, 4)[0]
        self.order = struct.unpack_from('>I', self.b, 96)[0] if version >= 3 else 4
        self.incompat = be64(self.b, 72) if version >= 3 else 0

    def ext_l2(self):
        return bool(self.incompat & (1 << 4))

    def refblock(self, cluster):
        per = self.cs * 8 >> self.order
        return be64(self.b, self.reft + 8 * (cluster // per)) & ~(self.cs - 1), cluster % per

    def set_refcount(self, cluster, v):
        rb, i = self.refblock(cluster)
        if not rb or rb + self.cs > len(self.b):
            return False
        bits = 1 << self.order
        if bits >= 8:
            n = bits // 8
            self.b[rb + i * n:rb + (i + 1) * n] = v.to_bytes(n, 'big')
        else:
            byte, shift = rb + i * bits // 8, i * bits % 8
            mask = ((1 << bits) - 1) << shift
            self.b[byte] = (self.b[byte] & ~mask) | ((v << shift) & mask)
        return True

    def l2_tables(self):
        for i in range(max(0, min(64, (len(self.b) - self.l1) // 8))):
            off = be64(self.b, self.l1 + 8 * i) & 0x00fffffffffffe00
            if off and off + self.cs <= len(self.b):
                yield i, off

    def first_data(self):
        step = 16 if self.ext_l2() else 8
        for _, l2 in self.l2_tables():
            for j in range(0, self.cs, step):
                e = be64(self.b, l2 + j)
                if not e & (1 << 62) and e & 0x00fffffffffffe00:
                    return (e & 0x00fffffffffffe00) // self.cs
        return None


def damages(img):
    out = {}
    end = (len(img.b) + img.cs - 1) // img.cs

    d = Image(img.b)
    d.b += bytes(end * img.cs - len(d.b) + img.cs)
    if d.set_refcount(end, 1):
        out['leak'] = d
    data = img.first_data()
    if data is not None:
        for name, v in (('refcount0', 0), ('refcount2', 2)):
            d = Image(img.b)
            if d.set_refcount(data, v):
                out[name] = d
    for name, e in (('refblock-outside', (end + 3) * img.cs),
                    ('refblock-wrap', 0xffffffffffff0000 & ~(img.cs - 1))):
        d = Image(img.b)
        if d.reft + 16 <= len(d.b):
            struct.pack_into('>Q', d.b, d.reft + 8, e)
            out[name] = d
    d = Image(img.b)
    if d.l1 + 8 <= len(d.b) and be64(d.b, d.l1):
        struct.pack_into('>Q', d.b, d.l1, be64(d.b, d.l1) & ~(1 << 63))
        out['l1-copied'] = d
    # compressed entries: each from the last sector of a host cluster over
    # as many sectors as the size field holds (three host clusters)
    d = Image(img.b)
    x = 62 - (img.cb - 8)
    changed = False
    for _, l2 in d.l2_tables():
        for j in range(0, img.cs, 16 if d.ext_l2() else 8):
            e = be64(d.b, l2 + j)
            if e & (1 << 62):
                host = e & ((1 << x) - 1)
                host = host // img.cs * img.cs + img.cs - 512
                e = (1 << 62) | (((1 << (img.cb - 8)) - 1) << x) | host
                struct.pack_into('>Q', d.b, l2 + j, e)
                changed = True
    if changed:
        out['compressed-span3'] = d
    return out


def main():
    outdir, images = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    n = 0
    for path in images:
        with open(path, 'rb') as f:
            img = Image(f.read())
        base = os.path.basename(path).rsplit('.', 1)[0]
        for name, d in damages(img).items():
            with open(os.path.join(outdir, '%s-%s.qcow2' % (base, name)), 'wb') as f:
                f.write(d.b)
            n += 1
    print('%d damaged images in %s' % (n, outdir))


if __name__ == '__main__':
    main()
