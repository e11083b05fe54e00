#!/usr/bin/env python3
"""A pairwise matrix of qcow2 features (tests/qcow2-feature-pairs.sh).

Prints one image per line, FEATURE=VALUE words, such that every pair of
values of two features that qemu allows together appears in at least one
image (greedy covering, fixed seed: the same list every run).  The last
line is "# N images cover M pairs".
"""
import itertools
import random

FEATURES = [
    ('cs', ['512', '4096', '16384', '65536', '2097152']),
    ('compat', ['0.10', '1.1']),
    ('extl2', ['off', 'on']),
    ('data', ['none', 'file', 'raw']),          # external data file (raw: data_file_raw)
    ('comp', ['none', 'zlib', 'zstd']),         # compressed clusters written
    ('backing', ['no', 'yes']),
    ('snap', ['no', 'yes']),                    # an internal snapshot
    ('bitmap', ['no', 'yes']),                  # persistent bitmaps
    ('refbits', ['1', '4', '16', '64']),
    ('lazy', ['off', 'on']),
    ('prealloc', ['off', 'metadata', 'falloc', 'full']),
]
NAMES = [f for f, _ in FEATURES]


def valid(c):
    """What qemu-img and qemu-io accept together."""
    if c['compat'] == '0.10' and (c['extl2'] == 'on' or c['data'] != 'none' or
                                  c['comp'] == 'zstd' or c['bitmap'] == 'yes' or
                                  c['refbits'] != '16' or c['lazy'] == 'on'):
        return False
    if c['extl2'] == 'on' and int(c['cs']) < 16384:
        return False
    # a data file has no compressed clusters and no internal snapshots
    if c['data'] != 'none' and (c['comp'] != 'none' or c['snap'] == 'yes'):
        return False
    if c['data'] == 'raw' and c['backing'] == 'yes':
        return False
    # compressed writes need unallocated clusters
    if c['comp'] != 'none' and c['prealloc'] != 'off':
        return False
    # refcount 1 at most: no shared clusters (snapshots, packed compression)
    if c['refbits'] == '1' and (c['snap'] == 'yes' or c['comp'] != 'none'):
        return False
    if c['backing'] == 'yes' and c['prealloc'] != 'off' and c['extl2'] != 'on':
        return False
    return True


def pairs(c):
    return {(i, c[NAMES[i]], j, c[NAMES[j]])
            for i, j in itertools.combinations(range(len(NAMES)), 2)}


def main():
    combos = [dict(zip(NAMES, v)) for v in itertools.product(*[l for _, l in FEATURES])]
    combos = [c for c in combos if valid(c)]
    need = set()
    for c in combos:
        need |= pairs(c)
    total = len(need)
    rng = random.Random(10)
    chosen = []
    while need:
        best, gain = None, 0
        for c in rng.sample(combos, min(3000, len(combos))):
            g = len(pairs(c) & need)
            if g > gain:
                best, gain = c, g
        if best is None:    # the sample missed: any image with a pair left
            p = next(iter(need))
            best = next(c for c in combos if p in pairs(c))
        chosen.append(best)
        need -= pairs(best)
    for c in chosen:
        print(' '.join('%s=%s' % (f, c[f]) for f in NAMES))
    print('# %d images cover %d pairs' % (len(chosen), total))


main()
