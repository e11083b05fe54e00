#!/usr/bin/env python3
"""Seed VMDKs that qemu-img cannot write: hosted sparse (KDMV) extents with
every grain size from 1 to 128 sectors (and 256..2048 where the file stays
small), in each layout the header can describe:

  sparse       plain grains, grain directory and its redundant copy
  sparse-zg    the same with the zeroed-grain flag and a GTE of 1
  sparse-gtes  4 entries per grain table (many tables)
  comp         compressed grains without markers (zlib data at the GTE)
  stream       streamOptimized: compressed grains with markers, GT and GD
               markers, the directory at the end (header: GD_AT_END) and a
               footer, then an end-of-stream marker
  stream-nofooter   the same, the header naming the directory, no footer
  stream-noeos      footer but no end-of-stream marker (a truncated
                    stream: readers must refuse it)
  stream-nogd       GD_AT_END and no footer (a stream cut before its
                    tables: refused, after a scan of the markers)
  markers      markers without compression (a legal, odd combination)

Every `sparse*` and `stream`/`stream-nofooter` seed, and `comp` from 32
sectors up, reads in qemu-img exactly as meant (--verify); the others are
layouts qemu-img refuses or reads otherwise (see seeds()), kept because a
reader must refuse them cleanly or read them right.

Each disk holds a few grains of patterned data, one of random bytes (so a
compressed grain is larger than the grain), one of zeros, grains at the
edges of the grain tables, and a partial last grain.

  make-vmdk-seeds.py OUTDIR [--verify]
  make-vmdk-seeds.py --inplace OUTDIR     (fuzz_vmdk_inplace: see inplace_seeds)
  make-vmdk-seeds.py --pack OUT IMAGE [FILE...]   (files into its container)

--verify reads every image back with qemu-img (the oracle) and compares it
with the content the script meant to write.  Sizes and offsets are in
512-byte sectors, all fields little-endian (VMware "Virtual Disk Format
1.1"); no code is taken from any implementation.
"""
import os
import random
import struct
import subprocess
import sys
import tempfile
import zlib

SECTOR = 512
GD_AT_END = 0xFFFFFFFFFFFFFFFF
FLAG_NL = 1
FLAG_RGD = 2
FLAG_ZERO_GRAIN = 4
FLAG_COMPRESSED = 0x10000
FLAG_MARKERS = 0x20000
MARKER_EOS, MARKER_GT, MARKER_GD, MARKER_FOOTER = 0, 1, 2, 3


def header(flags, capacity, grain, desc_off, desc_sectors, gtes, rgd, gd, overhead,
           compress, version):
    h = struct.pack('<4sIIQQQQIQQQB4sH', b'KDMV', version, flags, capacity, grain,
                    desc_off, desc_sectors, gtes, rgd, gd, overhead, 0, b'\n \r\n',
                    compress)
    return h.ljust(SECTOR, b'\0')


def descriptor(capacity, create_type, name):
    text = ('# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\n'
            'createType="%s"\n\n# Extent description\nRW %d SPARSE "%s"\n\n'
            '# The Disk Data Base\n#DDB\n\nddb.virtualHWVersion = "4"\n'
            'ddb.geometry.cylinders = "%d"\nddb.geometry.heads = "16"\n'
            'ddb.geometry.sectors = "63"\nddb.adapterType = "ide"\n'
            % (create_type, capacity, name, max(1, capacity // (16 * 63))))
    return text.encode()


def pad(b):
    return b + b'\0' * (-len(b) % SECTOR)


def sectors(nbytes):
    return (nbytes + SECTOR - 1) // SECTOR


def marker(value, mtype):
    return struct.pack('<QII', value, 0, mtype).ljust(SECTOR, b'\0')


class Disk:
    """The guest content: {grain index: bytes} (missing = unallocated)."""

    def __init__(self, grain, gtes, rng):
        self.grain = grain
        self.gtes = gtes
        gb = grain * SECTOR
        ngrains = gtes + max(2, gtes // 64)        # a second, partial table
        self.capacity = ngrains * grain - (grain // 2 if grain > 1 else 0)
        self.ngrains = ngrains
        want = sorted({0, 1, 3, gtes - 1, gtes, ngrains - 1})
        if grain >= 64:                             # keep the files small
            want = sorted({0, 3, gtes, ngrains - 1})
        self.data = {}
        for i, g in enumerate(want):
            if i == 2:
                # incompressible (the first 8 KiB: keeps big-grain seeds small)
                n = min(gb, 8192)
                body = bytes(rng.getrandbits(8) for _ in range(n)) + bytes(gb - n)
            elif i == 1:
                body = bytes(gb)                                      # allocated zeros
            else:
                body = bytes((g * 7 + k // 512 + (k % 512) // 3) & 0xFF for k in range(gb))
            self.data[g] = body
        self.zero_grain = 5 if ngrains > 6 and 5 not in self.data else None

    def raw(self):
        gb = self.grain * SECTOR
        out = bytearray(self.capacity * SECTOR)
        for g, body in self.data.items():
            start = g * gb
            n = min(gb, len(out) - start)
            out[start:start + n] = body[:n]
        return bytes(out)


def metadata_layout(ntables, gtes, desc_sectors):
    """Sectors of a hosted sparse extent's metadata, in file order: header,
    descriptor, redundant directory and tables, directory and tables.
    Returns (gd_sectors, gt_sectors, rgd, rgt0, gd, gt0, end)."""
    gd_sectors = sectors(ntables * 4)
    gt_sectors = sectors(gtes * 4)
    rgd = 1 + desc_sectors
    rgt0 = rgd + gd_sectors
    gd = rgt0 + ntables * gt_sectors
    gt0 = gd + gd_sectors
    return gd_sectors, gt_sectors, rgd, rgt0, gd, gt0, gt0 + ntables * gt_sectors


def sparse(disk, kind, name):
    """A hosted sparse extent: header, descriptor, RGD + RGTs, GD + GTs, grains."""
    grain, gtes = disk.grain, disk.gtes
    ntables = (disk.capacity + grain * gtes - 1) // (grain * gtes)
    comp = kind == 'comp'
    flags = FLAG_NL | FLAG_RGD | (FLAG_COMPRESSED if comp else 0)
    if kind == 'sparse-zg':
        flags |= FLAG_ZERO_GRAIN
    desc = pad(descriptor(disk.capacity, 'monolithicSparse', name))
    desc_sectors = max(20, sectors(len(desc)))
    gd_sectors, gt_sectors, rgd, rgt0, gd, gt0, overhead = \
        metadata_layout(ntables, gtes, desc_sectors)
    align = min(grain, 128) if comp else grain     # small files for big compressed grains
    overhead = (overhead + align - 1) // align * align
    gte = [0] * (ntables * gtes)
    grains = bytearray()
    pos = overhead
    for g in sorted(disk.data):
        body = disk.data[g]
        if comp:
            blob = pad(zlib.compress(body, 6))
        else:
            blob = body
        gte[g] = pos
        grains += blob
        pos += sectors(len(blob))
    if kind == 'sparse-zg' and disk.zero_grain is not None:
        gte[disk.zero_grain] = 1
    tables = b''.join(pad(struct.pack('<%dI' % gtes, *gte[t * gtes:(t + 1) * gtes]))
                      for t in range(ntables))
    rdir = pad(struct.pack('<%dI' % ntables, *[rgt0 + t * gt_sectors for t in range(ntables)]))
    ddir = pad(struct.pack('<%dI' % ntables, *[gt0 + t * gt_sectors for t in range(ntables)]))
    img = header(flags, disk.capacity, grain, 1, desc_sectors, gtes, rgd, gd, overhead,
                 1 if comp else 0, 1 if not comp else 3)
    img += desc.ljust(desc_sectors * SECTOR, b'\0') + rdir + tables + ddir + tables
    img = img.ljust(overhead * SECTOR, b'\0') + grains
    return img


def stream(disk, kind, name):
    """streamOptimized: grain markers, then GT markers and tables, the GD, the
    footer and the end-of-stream marker (what `kind` leaves out aside)."""
    grain, gtes = disk.grain, disk.gtes
    ntables = (disk.capacity + grain * gtes - 1) // (grain * gtes)
    comp = kind != 'markers'
    flags = FLAG_NL | FLAG_MARKERS | (FLAG_COMPRESSED if comp else 0)
    desc = pad(descriptor(disk.capacity, 'streamOptimized', name))
    desc_sectors = sectors(len(desc))
    overhead = 1 + desc_sectors
    overhead = (overhead + 7) // 8 * 8
    body = bytearray()
    pos = overhead
    gte = [0] * (ntables * gtes)
    for g in sorted(disk.data):
        data = disk.data[g]
        if g == disk.ngrains - 1:                 # the partial last grain
            data = data[:disk.capacity * SECTOR - g * grain * SECTOR]
        payload = zlib.compress(data, 6) if comp else data
        blob = pad(struct.pack('<QI', g * grain, len(payload)) + payload)
        gte[g] = pos
        body += blob
        pos += len(blob) // SECTOR
    gt_sectors = sectors(gtes * 4)
    gts = []
    for t in range(ntables):
        entries = gte[t * gtes:(t + 1) * gtes]
        if not any(entries):
            gts.append(0)
            continue
        body += marker(gt_sectors, MARKER_GT)
        pos += 1
        gts.append(pos)
        body += pad(struct.pack('<%dI' % gtes, *entries))
        pos += gt_sectors
    gd_sectors = sectors(ntables * 4)
    body += marker(gd_sectors, MARKER_GD)
    pos += 1
    gd = pos
    body += pad(struct.pack('<%dI' % ntables, *gts))
    pos += gd_sectors
    at_end = kind != 'stream-nofooter'
    if kind == 'stream-nogd':
        body = body[:(gts[0] - 1 - overhead) * SECTOR] if gts[0] else body
    elif at_end:
        body += marker(1, MARKER_FOOTER)
        body += header(flags, disk.capacity, grain, 1, desc_sectors, gtes, 0, gd, overhead,
                       1 if comp else 0, 3)
    if kind not in ('stream-noeos',):
        body += marker(0, MARKER_EOS)
    img = header(flags, disk.capacity, grain, 1, desc_sectors, gtes, 0,
                 GD_AT_END if at_end else gd, overhead, 1 if comp else 0, 3)
    img += desc.ljust((overhead - 1) * SECTOR, b'\0') + body
    return img


KINDS = {
    'sparse': sparse, 'sparse-zg': sparse, 'sparse-gtes': sparse, 'comp': sparse,
    'stream': stream, 'stream-nofooter': stream, 'stream-noeos': stream,
    'stream-nogd': stream, 'markers': stream,
}


def seeds():
    """(name, image bytes, expected raw content) for every grain size and kind."""
    for grain in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
        for kind, make in KINDS.items():
            small = kind in ('comp', 'stream', 'stream-nofooter')
            if grain > 128 and not small:
                continue                # uncompressed big grains: too large a seed
            gtes = 4 if kind == 'sparse-gtes' else (512 if grain <= 16 else 64)
            disk = Disk(grain, gtes, random.Random(grain * 131 + len(kind)))
            name = 'g%d-%s.vmdk' % (grain, kind)
            img = make(disk, kind, name)
            raw = disk.raw()
            # not compared with qemu-img: a scan's result depends on how far
            # it gets (nogd); a footer without the end-of-stream marker is a
            # truncated stream (noeos); qemu reads uncompressed grains with
            # markers differently (markers) and compressed grains without
            # markers only up to the grain size (comp, small grains)
            if kind in ('stream-nogd', 'stream-noeos', 'markers') or \
                    (kind == 'comp' and grain <= 16):
                raw = None
            yield name, img, raw


# ---- fuzz_vmdk_inplace: images to rebase (--inplace OUTDIR) ---------------
#
# monolithicSparse and twoGbMaxExtentSparse disks of every grain size (1 to
# 2048 sectors), with and without a parent: a child's descriptor names
# parent.vmdk (parentFileNameHint, its CID as parentCID).  Each comes as a
# plain file (the fuzz target then stands a raw parent in for a missing
# one) and, where it has more than one file, in the target's "DIFZ"
# container: the image first, its extent files, the parent.  Grains of
# their own and the parent's within a budget (inputs stay under 512 KiB):
# none of 1024 and 2048 sectors are allocated, only the tables.

PARENT_CID = 0xabcdef01


def pack(files):
    """The fuzz target's container: b'DIFZ', then per file its name's length
    (a byte), the name, its length (4 bytes, little-endian), its bytes."""
    out = bytearray(b'DIFZ')
    for name, data in files:
        nb = name.encode()
        out += bytes([len(nb)]) + nb + struct.pack('<I', len(data)) + data
    return bytes(out)


def desc_text(create_type, extents, cid, parent):
    lines = ['# Disk DescriptorFile', 'version=1', 'CID=%08x' % cid,
             'parentCID=%08x' % (PARENT_CID if parent else 0xFFFFFFFF),
             'createType="%s"' % create_type]
    if parent:
        lines.append('parentFileNameHint="%s"' % parent)
    lines += ['', '# Extent description']
    lines += ['RW %d SPARSE "%s"' % e for e in extents]
    lines += ['', '# The Disk Data Base', '#DDB', '', 'ddb.virtualHWVersion = "4"',
              'ddb.adapterType = "ide"']
    return ('\n'.join(lines) + '\n').encode()


def extent(grain, gtes, capacity, data, desc=None, zero_grain=None):
    """A hosted sparse extent of `capacity` sectors: header, the embedded
    descriptor `desc` (or none), the redundant directory and tables, the
    directory and tables, the grains of `data` ({grain index: bytes})."""
    ntables = (capacity + grain * gtes - 1) // (grain * gtes)
    flags = FLAG_NL | FLAG_RGD | (FLAG_ZERO_GRAIN if zero_grain is not None else 0)
    desc_sectors = max(20, sectors(len(desc))) if desc else 0
    gd_sectors, gt_sectors, rgd, rgt0, gd, gt0, overhead = \
        metadata_layout(ntables, gtes, desc_sectors)
    overhead = (overhead + min(grain, 128) - 1) // min(grain, 128) * min(grain, 128)
    gte = [0] * (ntables * gtes)
    grains = bytearray()
    pos = overhead
    for g in sorted(data):
        gte[g] = pos
        grains += pad(data[g])
        pos += sectors(len(data[g]))
    if zero_grain is not None:
        gte[zero_grain] = 1
    tables = b''.join(pad(struct.pack('<%dI' % gtes, *gte[t * gtes:(t + 1) * gtes]))
                      for t in range(ntables))
    rdir = pad(struct.pack('<%dI' % ntables, *[rgt0 + t * gt_sectors for t in range(ntables)]))
    ddir = pad(struct.pack('<%dI' % ntables, *[gt0 + t * gt_sectors for t in range(ntables)]))
    img = header(flags, capacity, grain, 1 if desc else 0, desc_sectors, gtes, rgd, gd,
                 overhead, 0, 1)
    if desc:
        img += desc.ljust(desc_sectors * SECTOR, b'\0')
    img += rdir + tables + ddir + tables
    return img.ljust(overhead * SECTOR, b'\0') + grains


def grain_data(grain, indexes, salt, budget=160 << 10):
    """Patterned grains at `indexes` while they fit `budget` bytes."""
    gb = grain * SECTOR
    out = {}
    for g in indexes:
        if (len(out) + 1) * gb > budget:
            break
        out[g] = bytes((g * 13 + salt + k // 512 * 5 + k % 251) & 0xFF for k in range(gb))
    return out


def inplace_seeds():
    """(name, bytes) of every fuzz_vmdk_inplace seed."""
    for grain in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
        gtes = 512 if grain <= 16 else 64
        ngrains = gtes + 3                      # a second, partial table
        capacity = ngrains * grain - (grain // 2 if grain > 1 else 0)
        last = ngrains - 1
        own = grain_data(grain, [1, gtes - 1, gtes + 1], 0x40)
        zg = 4 if grain <= 128 else None
        pdata = grain_data(grain, [0, 1, 2, gtes, last], 0x80)
        pdesc = desc_text('monolithicSparse', [(capacity, 'parent.vmdk')], PARENT_CID, None)
        parent = extent(grain, gtes, capacity, pdata, pdesc)
        for with_parent in (False, True):
            hint = 'parent.vmdk' if with_parent else None
            tag = 'g%d-%s' % (grain, 'child' if with_parent else 'alone')
            # monolithicSparse
            desc = desc_text('monolithicSparse', [(capacity, 'img.vmdk')], 0x12345678, hint)
            mono = extent(grain, gtes, capacity, own, desc, zg)
            yield 'mono-%s.vmdk' % tag, mono
            if with_parent:
                yield 'mono-%s-pack' % tag, pack([('img.vmdk', mono), ('parent.vmdk', parent)])
            # twoGbMaxExtentSparse: two extents, the first one table long
            c1 = gtes * grain
            c2 = capacity - c1
            d = desc_text('twoGbMaxExtentSparse', [(c1, 'img-s001.vmdk'), (c2, 'img-s002.vmdk')],
                          0x23456789, hint)
            e1 = extent(grain, gtes, c1, {g: b for g, b in own.items() if g < gtes})
            e2 = extent(grain, gtes, c2, {g - gtes: b for g, b in own.items() if g >= gtes})
            files = [('img.vmdk', d), ('img-s001.vmdk', e1), ('img-s002.vmdk', e2)]
            if with_parent:
                files.append(('parent.vmdk', parent))
            yield 'split-%s-pack' % tag, pack(files)


def verify(path, raw):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'out.raw')
        r = subprocess.run(['qemu-img', 'convert', '-f', 'vmdk', '-O', 'raw', path, out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return 'qemu-img cannot read it: ' + r.stderr.strip()
        with open(out, 'rb') as f:
            got = f.read()
        if got != raw:
            diff = next((i for i in range(min(len(got), len(raw))) if got[i] != raw[i]),
                        min(len(got), len(raw)))
            return 'qemu-img reads other content (%d vs %d bytes, first difference at %d)' % (
                len(got), len(raw), diff)
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit('usage: make-vmdk-seeds.py OUTDIR [--verify]\n'
                 '       make-vmdk-seeds.py --inplace OUTDIR\n'
                 '       make-vmdk-seeds.py --pack OUT IMAGE [FILE...]')
    if sys.argv[1] == '--pack':
        files = [(os.path.basename(p), open(p, 'rb').read()) for p in sys.argv[3:]]
        with open(sys.argv[2], 'wb') as f:
            f.write(pack(files))
        return
    if sys.argv[1] == '--inplace':
        out = sys.argv[2]
        os.makedirs(out, exist_ok=True)
        n = 0
        for name, img in inplace_seeds():
            with open(os.path.join(out, name), 'wb') as f:
                f.write(img)
            n += 1
        print('%d vmdk in-place seeds in %s' % (n, out))
        return
    out = sys.argv[1]
    check = '--verify' in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    bad = n = 0
    for name, img, raw in seeds():
        path = os.path.join(out, name)
        with open(path, 'wb') as f:
            f.write(img)
        n += 1
        if check and raw is not None:
            why = verify(path, raw)
            if why:
                print('%s: %s' % (name, why), file=sys.stderr)
                bad += 1
    print('%d vmdk seeds in %s%s' % (n, out, ', %d verified bad' % bad if check else ''))
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
