#!/usr/bin/env python3
"""Write a VHDX for the tests, laid out from [MS-VHDX] (for what qemu-img
cannot make: differencing disks with sector bitmaps and parent locators,
4096-byte sectors, every BAT state, logs to replay, damaged structures).

  vhdxmake.py OUT --size BYTES [options]
    --type fixed|dynamic|diff   (default dynamic)
    --block N            block size (default 1 MiB)
    --sector N           logical sector size (512, 4096); --psector physical
    --write OFF:LEN:B    bytes [OFF, OFF+LEN) hold byte B (whole logical
                         sectors).  dynamic/fixed: the block is fully present
                         (the rest zeros); diff: partially present, the
                         sectors' bits set, the rest of the block 0xEE garbage
                         with bits clear
    --state BLOCK:S      force payload block BLOCK's state (0 not present,
                         1 undefined, 2 zero, 3 unmapped, 6 fully present:
                         filled with 0xEE unless written)
    --parent FILE        diff: the parent (its DataWriteGuid is the linkage)
    --linkage GUID       diff: parent_linkage as given
    --loc KEY=VALUE      a parent locator entry (relative_path=.\\p.vhdx, ...)
    --log N              a dirty log of N entries (N >= 1): the BAT pages
                         and the file parameters reach the file only through
                         the log (what is in place is stale: every entry not
                         present, block size 0xdeadbeef is NOT written:
                         instead the in-place BAT is all zeros)
    --log-wrap           place the active sequence so it wraps around the end
                         of the ring
    --log-stale          an older sequence (lower numbers) elsewhere in the
                         ring, writing garbage
    --log-data           the written blocks' data go through the log too
                         (in place, the sectors logged hold 0x5A)
    --log-zero           a zero descriptor clears a 4 KiB garbage run the
                         file holds in the metadata region's free space
    --log-overwrite      the first entry first writes garbage over every
                         sector the log writes (and the zero run): the
                         later writes must win
    --log-size N         log length (default 1 MiB; 0: no log region)
    --expect RAW         write the guest content the image should read as
    --parent-raw RAW     diff: the parent's guest content (for --expect)
    --corrupt WHAT       damage the image (see CORRUPTIONS)
"""
import argparse, os, struct, sys, uuid

MiB = 1 << 20
KiB = 1024

def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
        t.append(c)
    return t

TABLE = crc32c_table()

def crc32c(b):
    c = 0xffffffff
    for x in b:
        c = TABLE[(c ^ x) & 0xff] ^ (c >> 8)
    return c ^ 0xffffffff

def guid(text):
    return uuid.UUID(text).bytes_le

G_BAT = guid('2dc27766-f623-4200-9d64-115e9bfd4a08')
G_META = guid('8b7ca206-4790-4b9a-b8fe-575f050f886e')
G_FILE = guid('caa16737-fa36-4d43-b3b6-33f0aa44e76b')
G_SIZE = guid('2fa54224-cd1b-4876-b211-5dbed83bf4b8')
G_P83 = guid('beca12ab-b2e6-4523-93ef-c309e000c746')
G_LSS = guid('8141bf1d-a96f-4709-ba47-f233a8faab5f')
G_PSS = guid('cda348c7-445d-4471-9cc9-e9885251c556')
G_PLOC = guid('a8d35f2d-b30b-454d-abf7-d3d84834ab0c')
G_PTYPE = guid('b04aefb7-d19e-4a81-b789-25b8e9445913')

CORRUPTIONS = [
    'block-size', 'sector-size', 'disk-size', 'bat-past-eof', 'bat-over-meta',
    'bat-overlap', 'bat-reserved', 'bat-state', 'region-required', 'meta-required',
    'region-overlap', 'region-missing', 'both-headers', 'header', 'region1',
    'headers-same-seq', 'log-crc', 'log-flushed', 'log-guid', 'log-past-eof',
    'partial-no-bitmap', 'meta-missing', 'bat-small', 'truncate',
]

def header(seq, fw, dw, lg, log_len, log_off):
    b = bytearray(4096)
    b[0:4] = b'head'
    struct.pack_into('<Q', b, 8, seq)
    b[16:32], b[32:48], b[48:64] = fw, dw, lg
    struct.pack_into('<HHIQ', b, 64, 0, 1, log_len, log_off)
    struct.pack_into('<I', b, 4, crc32c(b))
    return b

def region_table(entries):
    b = bytearray(64 * KiB)
    b[0:4] = b'regi'
    struct.pack_into('<I', b, 8, len(entries))
    for i, (g, off, ln, req) in enumerate(entries):
        struct.pack_into('<16sQII', b, 16 + 32 * i, g, off, ln, req)
    struct.pack_into('<I', b, 4, crc32c(b))
    return b

def utf16(s):
    return s.encode('utf-16-le')

def parent_locator(kv):
    n = len(kv)
    b = bytearray(20 + 12 * n)
    b[0:16] = G_PTYPE
    struct.pack_into('<HH', b, 16, 0, n)
    pos = len(b)
    data = bytearray()
    for i, (k, v) in enumerate(kv):
        kb, vb = utf16(k), utf16(v)
        struct.pack_into('<IIHH', b, 20 + 12 * i, pos + len(data), pos + len(data) + len(kb),
                         len(kb), len(vb))
        data += kb + vb
    return bytes(b + data)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--size', type=int, required=True)
    ap.add_argument('--type', default='dynamic')
    ap.add_argument('--block', type=int, default=MiB)
    ap.add_argument('--sector', type=int, default=512)
    ap.add_argument('--psector', type=int, default=4096)
    ap.add_argument('--write', action='append', default=[])
    ap.add_argument('--state', action='append', default=[])
    ap.add_argument('--parent')
    ap.add_argument('--linkage')
    ap.add_argument('--loc', action='append', default=[])
    ap.add_argument('--log', type=int, default=0)
    ap.add_argument('--log-wrap', action='store_true')
    ap.add_argument('--log-stale', action='store_true')
    ap.add_argument('--log-data', action='store_true')
    ap.add_argument('--log-zero', action='store_true')
    ap.add_argument('--log-overwrite', action='store_true')
    ap.add_argument('--log-size', type=int, default=MiB)
    ap.add_argument('--expect')
    ap.add_argument('--parent-raw')
    ap.add_argument('--corrupt', action='append', default=[])
    a = ap.parse_args()
    for c in a.corrupt:
        if c not in CORRUPTIONS:
            sys.exit('unknown corruption %s (%s)' % (c, ', '.join(CORRUPTIONS)))
    diff = a.type == 'diff'
    bs, ls, size = a.block, a.sector, a.size
    nblocks = (size + bs - 1) // bs
    ratio = (1 << 23) * ls // bs
    if diff:
        chunks = (nblocks + ratio - 1) // ratio
        nbat = chunks * (ratio + 1)
    else:
        nbat = nblocks + (nblocks - 1) // ratio
    bat_len = (nbat * 8 + MiB - 1) // MiB * MiB
    log_off, log_len = MiB, a.log_size
    if a.log and not log_len:
        sys.exit('a log needs --log-size')
    meta_off = log_off + log_len
    bat_off = meta_off + MiB
    pos = bat_off + bat_len

    # guest content of the blocks: block -> (data bytearray, bitmap set of sectors)
    blocks = {}
    states = {}
    def block(b):
        if b not in blocks:
            blocks[b] = [bytearray((b'\xee' if diff else b'\0') * bs), set()]
        return blocks[b]
    for w in a.write:
        off, ln, byte = w.split(':')
        off, ln, byte = int(off), int(ln), int(byte, 0)
        assert off % ls == 0 and ln % ls == 0
        for s in range(off // ls, (off + ln) // ls):
            b = s * ls // bs
            blk = block(b)
            i = s - b * bs // ls
            blk[0][i * ls:(i + 1) * ls] = bytes([byte]) * ls
            blk[1].add(i)
    for s in a.state:
        b, st = (int(x) for x in s.split(':'))
        states[b] = st
        if st == 6:
            block(b)
    if a.type == 'fixed':
        for b in range(nblocks):
            block(b)
    # place blocks (and the bitmaps of a differencing disk)
    bat = [0] * nbat
    place = {}
    for b in sorted(blocks):
        place[b] = pos
        st = states.get(b, 7 if diff and len(blocks[b][1]) < bs // ls else 6)
        if b in states and st != 6 and st != 7:
            place[b] = None
        else:
            bat[b + b // ratio] = pos | st
            # the last block takes only what the disk uses (whole MiBs)
            pos += bs if b < nblocks - 1 else (size - b * bs + MiB - 1) // MiB * MiB
    for b, st in states.items():
        if st not in (6, 7):
            bat[b + b // ratio] = st
    bitmaps = {}
    if diff:
        for b in sorted(blocks):
            c = b // ratio
            if c not in bitmaps and (bat[b + b // ratio] & 7) == 7:
                bitmaps[c] = (pos, bytearray(MiB))
                bat[c * (ratio + 1) + ratio] = pos | 6
                pos += MiB
        for b, (data, bits) in blocks.items():
            c = b // ratio
            if c in bitmaps:
                base = (b % ratio) * (bs // ls)
                for i in bits:
                    bitmaps[c][1][(base + i) // 8] |= 1 << ((base + i) % 8)
    if 'partial-no-bitmap' in a.corrupt:
        for c in bitmaps:
            bat[c * (ratio + 1) + ratio] = 0
    file_end = pos

    f = bytearray(file_end)
    f[0:8] = b'vhdxfile'
    cr = utf16('vhdxmake.py')
    f[8:8 + len(cr)] = cr
    fw, dw = uuid.uuid4().bytes_le, uuid.uuid4().bytes_le
    lg = uuid.uuid4().bytes_le if a.log else b'\0' * 16
    # regions
    regs = [(G_BAT, bat_off, bat_len, 1), (G_META, meta_off, MiB, 1)]
    if 'region-required' in a.corrupt:
        regs.append((guid('11111111-2222-3333-4444-555555555555'), pos, MiB, 1))
    if 'region-overlap' in a.corrupt:
        regs[0] = (G_BAT, meta_off, bat_len, 1)
    if 'region-missing' in a.corrupt:
        regs = regs[1:]
    rt = region_table(regs)
    f[192 * KiB:256 * KiB] = rt
    f[256 * KiB:320 * KiB] = rt
    if 'region1' in a.corrupt:
        f[192 * KiB + 100] ^= 0xff
    # metadata
    params = struct.pack('<II', bs if 'block-size' not in a.corrupt else 3 * MiB,
                         (2 if diff else 0))
    items = [(G_FILE, params, 4), (G_SIZE, struct.pack('<Q', size if 'disk-size' not in a.corrupt
                                                       else (65 << 40)), 6),
             (G_P83, uuid.uuid4().bytes_le, 6),
             (G_LSS, struct.pack('<I', ls if 'sector-size' not in a.corrupt else 1024), 6),
             (G_PSS, struct.pack('<I', a.psector), 6)]
    if diff:
        kv = []
        if a.linkage:
            kv.append(('parent_linkage', a.linkage))
        elif a.parent:
            pf = open(a.parent, 'rb').read(256 * KiB)
            h1, h2 = pf[64 * KiB:68 * KiB], pf[128 * KiB:132 * KiB]
            s1, s2 = struct.unpack_from('<Q', h1, 8)[0], struct.unpack_from('<Q', h2, 8)[0]
            h = h1 if s1 >= s2 else h2
            kv.append(('parent_linkage', '{%s}' % uuid.UUID(bytes_le=bytes(h[32:48]))))
        for l in a.loc:
            k, v = l.split('=', 1)
            kv.append((k, v))
        items.append((G_PLOC, parent_locator(kv), 6))
    if 'meta-required' in a.corrupt:
        items.append((guid('99999999-2222-3333-4444-555555555555'), b'x' * 8, 4))
    if 'meta-missing' in a.corrupt:
        items = [it for it in items if it[0] != G_P83]
    mt = bytearray(64 * KiB)
    mt[0:8] = b'metadata'
    struct.pack_into('<H', mt, 10, len(items))
    ipos = 64 * KiB
    for i, (g, data, flags) in enumerate(items):
        struct.pack_into('<16sIII', mt, 32 + 32 * i, g, ipos, len(data), flags)
        f[meta_off + ipos:meta_off + ipos + len(data)] = data
        ipos += (len(data) + 4095) // 4096 * 4096
    f[meta_off:meta_off + 64 * KiB] = mt
    zero_run = meta_off + 512 * KiB
    # BAT corruptions
    present = [i for i in range(nbat) if (bat[i] & 7) == 6 and i % (ratio + 1) != ratio]
    if 'bat-past-eof' in a.corrupt:
        bat[present[-1]] = (file_end + 64 * MiB) | 6
    if 'bat-over-meta' in a.corrupt:
        bat[present[0]] = meta_off | 6
    if 'bat-overlap' in a.corrupt:
        bat[present[1]] = (bat[present[0]] & ~7) | 6
    if 'bat-reserved' in a.corrupt:
        bat[present[0]] |= 1 << 10
    if 'bat-state' in a.corrupt:
        bat[0] = 4
    if 'bat-small' in a.corrupt:
        regs = [(G_BAT, bat_off, MiB, 1), (G_META, meta_off, MiB, 1)]
    batb = bytearray(bat_len)
    for i, e in enumerate(bat):
        struct.pack_into('<Q', batb, 8 * i, e)
    # block data
    for b, off in place.items():
        if off is not None:
            n = min(bs, file_end - off)
            f[off:off + n] = blocks[b][0][:n]
    for c, (off, bm) in bitmaps.items():
        f[off:off + MiB] = bm

    # the log: what reaches the file only through it
    writes = []     # (file offset, 4 KiB bytes) in write order
    zeros = []
    if a.log:
        for p in range(0, bat_len, 4096):
            page = bytes(batb[p:p + 4096])
            if any(page) or p == 0:
                writes.append((bat_off + p, page))
        batb = bytearray(bat_len)   # in place: stale (nothing present)
        fp = meta_off + 64 * KiB
        writes.append((fp - fp % 4096, bytes(f[fp - fp % 4096:fp - fp % 4096 + 4096])))
        f[fp:fp + 8] = struct.pack('<II', 0, 0)     # stale: block size 0
        if a.log_data:
            for b, off in place.items():
                if off is None:
                    continue
                for p in range(0, bs, 4096):
                    sec = bytes(f[off + p:off + p + 4096])
                    if any(sec):
                        writes.append((off + p, sec))
                        f[off + p:off + p + 4096] = b'\x5a' * 4096
        if a.log_zero:
            f[zero_run:zero_run + 4096] = b'\x77' * 4096
            zeros.append((zero_run, 4096))
    f[bat_off:bat_off + bat_len] = batb
    if 'bat-small' in a.corrupt:
        rt = region_table(regs)
        f[192 * KiB:256 * KiB] = rt
        f[256 * KiB:320 * KiB] = rt

    log = bytearray(log_len)
    seq0 = 1000
    if a.log:
        # split the writes among the entries (the last entry takes the zero run)
        per = max(1, (len(writes) + a.log - 1) // a.log)
        parts = [writes[i * per:(i + 1) * per] for i in range(a.log)]
        entries = []
        for k, part in enumerate(parts):
            z = zeros if k == a.log - 1 else []
            entries.append((part, z))
        if a.log_overwrite:
            junk = [(off, b'\xab' * 4096) for off, _ in writes]
            if a.log > 1:   # (in one entry its zero descriptors come first)
                junk += [(off, b'\xab' * 4096) for off, _ in zeros]
            entries[0] = (junk + entries[0][0], entries[0][1])
        lengths = []
        for part, z in entries:
            nd = len(part) + len(z)
            dsec = (64 + 32 * nd + 4095) // 4096
            lengths.append((dsec + len(part)) * 4096)
        total = sum(lengths)
        start = 0
        if a.log_wrap:
            # the second entry (or the first one's data) crosses the end
            start = log_len - lengths[0] - 4096 if len(lengths) > 1 else log_len - 4096
        if a.log_stale:
            # an older sequence right after where the active one ends
            sp = (start + total) % log_len
            sent = make_entry(lg, 1, sp, [(bat_off, b'\xcc' * 4096)], [], file_end, file_end)
            put_ring(log, sp, sent)
        p = start
        tail = start
        flushed = file_end + (MiB if 'log-flushed' in a.corrupt else 0)
        if 'log-past-eof' in a.corrupt:
            entries[-1][0].append((file_end + 8 * MiB, bytes(4096)))
        for k, (part, z) in enumerate(entries):
            ent = make_entry(lg if 'log-guid' not in a.corrupt else uuid.uuid4().bytes_le,
                             seq0 + k, tail, part, z, flushed, flushed)
            if 'log-crc' in a.corrupt:
                ent[100] ^= 1
            put_ring(log, p, ent)
            p = (p + len(ent)) % log_len
    f[log_off:log_off + log_len] = log
    h1 = header(10, fw, dw, lg, log_len, log_off)
    h2 = header(11, fw, dw, lg, log_len, log_off)
    if 'headers-same-seq' in a.corrupt:
        h2 = header(10, uuid.uuid4().bytes_le, dw, lg, log_len, log_off)
    if 'header' in a.corrupt:
        h2[200] ^= 1        # the newer one damaged: the older one is used
    if 'both-headers' in a.corrupt:
        h1[200] ^= 1
        h2[200] ^= 1
    f[64 * KiB:68 * KiB] = h1
    f[128 * KiB:132 * KiB] = h2
    if 'truncate' in a.corrupt:
        f = f[:len(f) - bs // 2]
    with open(a.out, 'wb') as out:
        out.write(f)

    if a.expect:
        # written sparsely: only blocks that are not zeros
        out = open(a.expect, 'wb')
        out.truncate(size)
        praw = open(a.parent_raw, 'rb') if diff and a.parent_raw else None
        for b in range(nblocks):
            lo, hi = b * bs, min(size, (b + 1) * bs)
            st = states.get(b)
            g = None
            if praw is not None and has_data(praw, lo, hi):
                praw.seek(lo)
                g = bytearray(praw.read(hi - lo).ljust(hi - lo, b'\0'))
            if b in blocks and (st is None or st in (6, 7)):
                data, bits = blocks[b]
                if diff and (bat[b + b // ratio] & 7) == 7:
                    g = g if g is not None else bytearray(hi - lo)
                    for i in bits:
                        s0 = i * ls
                        if lo + s0 < hi:
                            g[s0:s0 + ls] = data[s0:s0 + ls]
                else:
                    g = data[:hi - lo]
            elif st in (2, 3) or not diff:
                g = None
            if g is not None:
                out.seek(lo)
                out.write(g)
        out.close()

def has_data(f, lo, hi):
    """Whether the file has data (not a hole) in [lo, hi)."""
    try:
        return os.lseek(f.fileno(), lo, os.SEEK_DATA) < hi
    except OSError:
        return False

def make_entry(lg, seq, tail, writes, zeros, flushed, last):
    nd = len(writes) + len(zeros)
    dsec = (64 + 32 * nd + 4095) // 4096
    ln = (dsec + len(writes)) * 4096
    e = bytearray(ln)
    e[0:4] = b'loge'
    struct.pack_into('<IIQI', e, 8, ln, tail, seq, nd)
    e[32:48] = lg
    struct.pack_into('<QQ', e, 48, flushed, last)
    i = 0
    for off, ln0 in zeros:
        struct.pack_into('<4sIQQQ', e, 64 + 32 * i, b'zero', 0, ln0, off, seq)
        i += 1
    for k, (off, sec) in enumerate(writes):
        struct.pack_into('<4sI8sQQ', e, 64 + 32 * i, b'desc', struct.unpack('<I', sec[4092:])[0],
                         sec[0:8], off, seq)
        i += 1
        d = (dsec + k) * 4096
        e[d:d + 4] = b'data'
        struct.pack_into('<I', e, d + 4, seq >> 32)
        e[d + 8:d + 4092] = sec[8:4092]
        struct.pack_into('<I', e, d + 4092, seq & 0xffffffff)
    struct.pack_into('<I', e, 4, crc32c(e))
    return e

def put_ring(log, p, ent):
    n = len(log)
    for i in range(0, len(ent), 4096):
        q = (p + i) % n
        log[q:q + 4096] = ent[i:i + 4096]

if __name__ == '__main__':
    main()
