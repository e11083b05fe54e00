#!/bin/bash
# check -r all on a qcow2 image that needs its refcounts rebuilt and has an
# L2 entry naming the cluster just past the end of the file.  The count
# leaves that reference out (as qemu's), so the cluster looks free, and the
# rebuild used to put a new refcount block there: the guest cluster then
# read the refcount block as data (qemu-img check -r all does the same and
# says the image still has errors).  A rebuild never grows the file over
# clusters the image names past its end: refused, the image untouched,
# everything else readable as before.  With the pointer well past where
# the new structure goes, the rebuild goes ahead and the entry still fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
need python3
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 plain.qcow2 4M
qemu-io -c 'write -P 0x71 0 200k' plain.qcow2 > /dev/null
# damage IMG CLUSTERS_PAST_END: guest cluster 10 names that host cluster
# past the end; the L1 table's refcount is 0 (a rebuild)
damage() {
    cp plain.qcow2 "$1"
    python3 - "$1" "$2" <<'EOF' || fail "python"
import struct, sys
path, past = sys.argv[1], int(sys.argv[2])
f = open(path, 'r+b'); b = f.read()
q = lambda off: struct.unpack_from('>Q', b, off)[0]
l1, reft = q(40), q(48)
rb, l2 = q(reft), q(l1) & 0x00fffffffffffe00
f.seek(l2 + 8 * 10); f.write(struct.pack('>Q', (1 << 63) | ((len(b) // 65536 + past) * 65536)))
f.seek(rb + 2 * (l1 // 65536)); f.write(b'\0\0')
EOF
}

damage near.qcow2 0
cp near.qcow2 mine.qcow2
expect_error "mine\.qcow2: cannot rebuild the refcount structure: the image names clusters past the end of its file.*not repaired" \
    "$DISKIMG" check -r all mine.qcow2
cmp -s near.qcow2 mine.qcow2 || fail "the refused repair changed the image"
qemu-io -c 'read -q -P 0x71 0 200k' mine.qcow2 > qio 2>&1 && ! grep -q . qio ||
    fail "guest data no longer reads"

# far past the end (1000 clusters): rebuilt, the entry still names nothing
damage far.qcow2 1000
cp far.qcow2 mine.qcow2
rc=0; "$DISKIMG" check -r all mine.qcow2 > out 2> err || rc=$?
grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "sanitizer"; }
[ $rc = 2 ] || { cat err; fail "far: exit $rc, not 2 (the entry past the end remains)"; }
grep -q "Rebuilding refcount structure" err || fail "far: not rebuilt"
qemu-img check mine.qcow2 > qc 2>&1
grep -q "refcount=0 reference=1\|refcount block .* refcount=" qc && { cat qc; fail "far: refcounts still wrong"; }
qemu-io -c 'read -q -P 0x71 0 200k' mine.qcow2 > qio 2>&1 && ! grep -q . qio || fail "far: data"
"$DISKIMG" convert -O raw mine.qcow2 out.raw 2> err && fail "far: the entry past the end reads"
exit 0
