#!/usr/bin/env python3
"""Seeded differential test of `convert -n -O qcow2` (writing into an
existing image) against qemu-img's own -n.

Each case makes a random target with qemu-img/qemu-io -- cluster size 512 B
to 2 MiB, v2 or v3, extended L2 entries, refcount widths 1 to 64, lazy
refcounts, a backing file, then data, zero, discarded and compressed
clusters at random, internal snapshots taken between them -- and a random
source (tests/tools/genimg) that may end inside a cluster.  qemu-img
convert -n fills one copy, diskimg (with -W, -S 0, -m, -c or nothing) the
other: ours must pass qemu-img check without leaks, read back identical to
qemu-img's (qemu-img compare), and leave every snapshot as it was.  Targets
that qemu-io itself leaves corrupt, and runs where qemu-img fails, are
counted and skipped.

usage: inplace_diff.py DISKIMG GENIMG WORKDIR SEED CASES
"""
import random
import subprocess
import sys

MIB = 1 << 20


def sh(cmd, must=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if must and r.returncode:
        sys.exit(f"failed: {cmd}\n{r.stdout}{r.stderr}")
    return r


def target_options(rnd):
    cs = rnd.choice([512, 4096, 65536, 2 * MIB])
    compat = rnd.choice(["0.10", "1.1"])
    opts = [f"cluster_size={cs}", f"compat={compat}"]
    if compat == "1.1":
        if cs >= 16384 and rnd.random() < 0.4:
            opts.append("extended_l2=on")
        opts.append("refcount_bits=%d" % rnd.choice([1, 4, 16, 64]))
        if rnd.random() < 0.3:
            opts.append("lazy_refcounts=on")
    return cs, opts


def content_ops(rnd, cs, size, one_bit):
    ops = []
    for _ in range(rnd.randrange(0, 12)):
        off = rnd.randrange(0, size // cs) * cs
        length = min(rnd.randrange(1, 8) * cs, size - off)
        kind = rnd.choice("wzdc")
        if kind == "c" and one_bit:
            kind = "w"
        pat = rnd.randrange(1, 255)
        ops.append({"w": f"-c 'write -P {pat} {off} {length}'",
                    "z": f"-c 'write -z {off} {length}'",
                    "d": f"-c 'discard {off} {length}'",
                    "c": f"-c 'write -c -P {pat} {off} {cs}'"}[kind])
    return ops


def main():
    diskimg, genimg, work, seed, cases = sys.argv[1:6]
    seed, cases = int(seed), int(cases)
    bad = skipped = 0
    for i in range(cases):
        rnd = random.Random(seed * 100003 + i)
        cs, opts = target_options(rnd)
        tsize = rnd.choice([8, 16, 24]) * MIB
        ssize = rnd.randrange(1, tsize // 512 + 1) * 512
        backing = rnd.random() < 0.4
        flags = rnd.choice(["", "-W", "-S 0", "-m 2", "-c", "-c -W"])
        sh(f"cd {work} && rm -f q.qcow2 d.qcow2 base.qcow2 src.raw s*.raw")
        sh(f"{genimg} -s {seed * 100003 + i} -m 512 -M 512K {ssize} {work}/src.raw")
        b = ""
        if backing:
            sh(f"qemu-img create -q -f qcow2 {work}/base.qcow2 {tsize}")
            sh(f"qemu-io -c 'write -P 0x22 0 {tsize}' {work}/base.qcow2")
            b = f"-b {work}/base.qcow2 -F qcow2"
        sh(f"qemu-img create -q -f qcow2 -o {','.join(opts)} {b} {work}/q.qcow2 {tsize}")
        ops = content_ops(rnd, cs, tsize, "refcount_bits=1" in opts)
        snaps = []
        for k in range(0, len(ops), 4):
            # qemu-io fails some compressed writes (over allocated clusters)
            sh(f"qemu-io {' '.join(ops[k:k + 4])} {work}/q.qcow2", must=False)
            # (not with 1-bit refcounts: qemu-img refuses, and leaks a cluster)
            if rnd.random() < 0.25 and "refcount_bits=1" not in opts:
                snaps.append(f"s{len(snaps)}")
                sh(f"qemu-img snapshot -c {snaps[-1]} {work}/q.qcow2")
        what = f"case {i}: -o {','.join(opts)} backing={backing} source={ssize} " \
               f"target={tsize} flags='{flags}' snapshots={len(snaps)} " \
               f"qemu-io {' '.join(ops)}"
        if sh(f"qemu-img check {work}/q.qcow2", must=False).returncode == 2:
            skipped += 1    # qemu-io left it corrupt (2 MiB clusters, -c)
            continue
        sh(f"cp {work}/q.qcow2 {work}/d.qcow2")
        for s in snaps:
            sh(f"qemu-img convert -O raw -l {s} {work}/q.qcow2 {work}/{s}.raw")
        if sh(f"qemu-img convert -n -O qcow2 {work}/src.raw {work}/q.qcow2",
              must=False).returncode:
            skipped += 1
            continue
        r = sh(f"{diskimg} convert -n -O qcow2 {flags} {work}/src.raw {work}/d.qcow2", must=False)
        if r.returncode:
            print(f"FAIL {what}: diskimg exit {r.returncode}: {r.stderr.strip()}")
            bad += 1
            continue
        c = sh(f"qemu-img check {work}/d.qcow2", must=False)
        if c.returncode or "leak" in c.stdout:
            print(f"FAIL {what}: qemu-img check exit {c.returncode}: {c.stdout[-400:]}")
            bad += 1
            continue
        if sh(f"qemu-img compare -q {work}/q.qcow2 {work}/d.qcow2", must=False).returncode:
            print(f"FAIL {what}: differs from qemu-img's -n")
            bad += 1
            continue
        for s in snaps:
            sh(f"qemu-img convert -O raw -l {s} {work}/d.qcow2 {work}/{s}.after.raw")
            if sh(f"cmp -s {work}/{s}.raw {work}/{s}.after.raw", must=False).returncode:
                print(f"FAIL {what}: snapshot {s} changed")
                bad += 1
                break
    print(f"{cases} cases: {bad} failed, {skipped} skipped (qemu-io or qemu-img failed)")
    return 1 if bad or skipped > cases // 4 else 0


if __name__ == "__main__":
    sys.exit(main())
