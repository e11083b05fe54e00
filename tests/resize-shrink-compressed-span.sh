#!/bin/bash
# resize --shrink of a qcow2 image whose compressed clusters each span
# three host clusters: the entry starts 127 sectors into a 64 KiB cluster
# and claims 256 sectors (the most its size field can say), so it touches
# that cluster and the next two.  The image is valid (qemu-img check finds
# nothing; every entry names the same compressed data, whose clusters have
# the matching refcounts): the shrink must free all three clusters of
# every dropped entry (it once sized its list of clusters to free for two
# per entry and wrote past it), agree with qemu-img resize --shrink, and
# leave an image that checks clean and reads as before below the new size.
# Also 1 KiB clusters (4 sectors: an entry from sector 1 runs into a third
# cluster) and the grow path over the same images.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
need python3
cd "$T" || fail "cd"

# span3 IMG CLUSTER_BITS: every entry of the first L2 table compressed,
# all naming one deflate stream that starts in the last sector of a host
# cluster and claims the most sectors the size field holds (2 clusters)
span3() {
    python3 - "$1" "$2" <<'EOF' || fail "python: $1"
import struct, sys, zlib
path, cb = sys.argv[1], int(sys.argv[2])
cs = 1 << cb
f = open(path, 'r+b')
def rd(off, n): f.seek(off); return f.read(n)
def q(off): return struct.unpack('>Q', rd(off, 8))[0]
def w(off, b): f.seek(off); f.write(b)
l1 = q(40); reft = q(48); order = struct.unpack('>I', rd(96, 4))[0]
assert order == 4
l2 = q(l1) & 0x00fffffffffffe00
old = q(l2) & ((1 << (62 - (cb - 8))) - 1)        # qemu-io's compressed cluster
f.seek(0, 2); end = (f.tell() + cs - 1) // cs * cs
C = end // cs
sect = cs // 512 - 1                              # 127 for 64 KiB clusters
host = C * cs + sect * 512
nsec = 1 << (cb - 8)                              # 256 for 64 KiB clusters
co = zlib.compressobj(9, zlib.DEFLATED, -12)
data = co.compress(bytes([0x5a]) * cs) + co.flush()
w(end, bytes(3 * cs))
w(host, data)
assert (host + nsec * 512 - 1) // cs == C + 2      # three host clusters
per = cs // 8
e = (1 << 62) | ((nsec - 1) << (62 - (cb - 8))) | host
w(l2, struct.pack('>Q', e) * per)
# refcounts: the old compressed cluster is unused, the three get one per entry
per_rb = cs * 8 // 16
def setrc(c, v):
    rb = q(reft + 8 * (c // per_rb)) & ~(cs - 1)
    assert rb
    w(rb + 2 * (c % per_rb), struct.pack('>H', v))
setrc(old // cs, 0)
for c in (C, C + 1, C + 2):
    setrc(c, per)
f.close()
EOF
}

# reads IMG "OFF LEN PATTERN"...: qemu-io reads each range as that byte
reads() {
    local img=$1 args=() a; shift
    for a in "$@"; do set -- $a; args+=(-c "read -q -P $3 $1 $2"); done
    qemu-io "${args[@]}" "$img" > qio 2>&1 && ! grep -q . qio
}

# shrink_like_qemu IMG SIZE: every guest cluster of IMG's first table
# reads as 0x5a, so what is left below SIZE must too
shrink_like_qemu() {
    local img=$1 size=$2
    cp "$img" mine.qcow2; cp "$img" ref.qcow2
    "$DISKIMG" resize --shrink mine.qcow2 "$size" > out 2> err ||
        { cat err; fail "$img: resize --shrink $size"; }
    grep -q "AddressSanitizer\|runtime error" err && { cat err; fail "$img: sanitizer"; }
    qemu-img resize -q --shrink ref.qcow2 "$size" || fail "$img: qemu-img resize"
    qemu-img check -q mine.qcow2 || fail "$img $size: qemu-img check after the shrink"
    "$DISKIMG" check mine.qcow2 > /dev/null 2> err || { cat err; fail "$img $size: diskimg check"; }
    qemu-img compare -q mine.qcow2 ref.qcow2 || fail "$img $size: differs from qemu-img's"
    reads mine.qcow2 "0 $size 0x5a" || { cat qio; fail "$img $size: content changed"; }
    [ "$(stat -c %s mine.qcow2)" -le "$(stat -c %s "$img")" ] || fail "$img $size: the file grew"
    return 0
}

# 64 KiB clusters: 8192 entries of three clusters each in one table
qemu-img create -q -f qcow2 -o cluster_size=65536 c64.qcow2 1G
qemu-io -c 'write -c -P 0x5a 0 64k' c64.qcow2 > /dev/null
span3 c64.qcow2 16
qemu-img check -q c64.qcow2 || fail "the test image does not check clean"
reads c64.qcow2 "0 1M 0x5a" "511M 1M 0x5a" "512M 1M 0" || fail "the test image is not as meant"
shrink_like_qemu c64.qcow2 64K          # all but the first entry
shrink_like_qemu c64.qcow2 100M         # most of the table
shrink_like_qemu c64.qcow2 1536         # inside the first cluster

# 1 KiB clusters: entries from sector 1 over 4 sectors reach a third cluster
qemu-img create -q -f qcow2 -o cluster_size=1024 c1k.qcow2 1M
qemu-io -c 'write -c -P 0x5a 0 1k' c1k.qcow2 > /dev/null
span3 c1k.qcow2 10
qemu-img check -q c1k.qcow2 || fail "the 1 KiB test image does not check clean"
readback c1k.qcow2
shrink_like_qemu c1k.qcow2 1K
shrink_like_qemu c1k.qcow2 20K

# growing leaves the entries alone
cp c64.qcow2 g.qcow2
"$DISKIMG" resize -q g.qcow2 2G 2> err || { cat err; fail "grow"; }
qemu-img check -q g.qcow2 || fail "grow: qemu-img check"
reads g.qcow2 "0 1M 0x5a" "511M 1M 0x5a" "512M 1M 0" "2047M 1M 0" || fail "grow: content changed"
echo ok
