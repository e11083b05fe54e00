#!/bin/bash
# diskimg amend against qemu-img amend on identical copies of the same
# images (v2 and v3; refcount widths 1..64; snapshots, persistent bitmaps,
# compressed and zero clusters, a backing file, an external data file,
# zstd, extended L2): the same exit status and message, qemu-img info's
# JSON field by field (but the file's size), qemu-img check clean (not even
# leaks), the guest view and every snapshot's unchanged.  A refused change
# writes nothing (the file stays byte for byte the same, where qemu-img
# may already have changed part of what was asked).  Then the command
# line itself: option errors, -o help, --image-opts, as qemu-img.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
cd "$T" || fail "cd"

# info IMG: qemu-img info's JSON without the fields that name or measure
# the file (the two tools lay out new structures differently)
info() { qemu-img info --output=json "$1" 2>/dev/null | grep -v '^    "filename":\|^    "actual-size":'; }
snaps() { qemu-img snapshot -l "$1" | awk 'NR > 2 { print $2 }'; }
err_of() { sed -e 's/^qemu-img: //' -e 's/^diskimg: //' -e 's/^t.qcow2: //' -e "s/'qemu-img rebase'/'diskimg rebase'/" "$1"; }

# both OPTS IMG: amend copies of IMG with qemu-img and diskimg, compare
both() {
    local o=$1 img=$2 r1=0 r2=0 s
    cp "$img" q.qcow2; cp "$img" t.qcow2
    qemu-img amend -t unsafe -o "$o" q.qcow2 >/dev/null 2>q.err || r1=$?
    "$DISKIMG" amend -o "$o" t.qcow2 >/dev/null 2>t.err || r2=$?
    grep -q "AddressSanitizer\|runtime error" t.err && { cat t.err; fail "$o on $img: sanitizer"; }
    [ $r1 = $r2 ] || { cat q.err t.err; fail "$o on $img: exit $r2, qemu-img $r1"; }
    if [ $r1 != 0 ]; then
        [ "$(err_of q.err | grep -v '^warning')" = "$(err_of t.err)" ] ||
            { cat q.err t.err; fail "$o on $img: message differs"; }
        cmp -s "$img" t.qcow2 || fail "$o on $img: refused, but the image changed"
        return 0
    fi
    qemu-img check -q t.qcow2 >/dev/null 2>&1 || { qemu-img check t.qcow2; fail "$o on $img: not clean"; }
    info q.qcow2 > q.info; info t.qcow2 > t.info
    cmp -s q.info t.info || { diff q.info t.info; fail "$o on $img: info differs from qemu-img's"; }
    # (a snapshot is read at the image's current size)
    case $o in *size=*) return 0 ;; esac
    qcompare "$img" t.qcow2
    for s in $(snaps "$img"); do
        qemu-img convert -O raw -l "snapshot.name=$s" "$img" s0.raw
        qemu-img convert -O raw -l "snapshot.name=$s" t.qcow2 s1.raw
        cmp -s s0.raw s1.raw || fail "$o on $img: snapshot $s changed"
    done
}

# v3 with everything: data, zero clusters (plain and preallocated), a
# snapshot sharing clusters, a compressed cluster, writes after it
qemu-img create -q -f qcow2 v3.qcow2 8M
qemu-io -c 'write -P 1 0 1M' -c 'write -z 64k 128k' -c 'write -z 2M 64k' v3.qcow2 >/dev/null
qemu-img snapshot -c s1 v3.qcow2
qemu-io -c 'write -c -P 3 4M 64k' -c 'write -P 4 0 64k' -c 'write -z 3M 64k' v3.qcow2 >/dev/null
# small clusters: several refcount blocks at every width
qemu-img create -q -f qcow2 -o cluster_size=4k small.qcow2 16M
qemu-io -c 'write -P 5 0 6M' -c 'write -z 1M 64k' -c 'write -c -P 6 8M 1M' small.qcow2 >/dev/null
qemu-img snapshot -c s1 small.qcow2
# a backing file: zero clusters must stay zeros over it
qemu-img create -q -f qcow2 base.qcow2 8M
qemu-io -c 'write -P 7 0 4M' base.qcow2 >/dev/null
qemu-img create -q -f qcow2 -o cluster_size=4k -b base.qcow2 -F qcow2 top.qcow2
qemu-io -c 'write -P 1 0 1M' -c 'write -z 64k 128k' -c 'write -z 2M 64k' top.qcow2 >/dev/null
qemu-img snapshot -c s top.qcow2
qemu-io -c 'write -z 3M 64k' -c 'write -z 0 64k' top.qcow2 >/dev/null
# persistent bitmaps
qemu-img create -q -f qcow2 -o cluster_size=4k bm.qcow2 8M
qemu-io -c 'write 0 1M' bm.qcow2 >/dev/null
qemu-img bitmap --add bm.qcow2 b0
qemu-img bitmap --add -g 512k bm.qcow2 b1
# v2 with snapshots; one image whose entries lack v3's extra data
qemu-img create -q -f qcow2 -o compat=0.10,cluster_size=4k v2.qcow2 8M
qemu-io -c 'write -P 5 0 2M' v2.qcow2 >/dev/null
qemu-img snapshot -c s1 v2.qcow2
qemu-io -c 'write -P 6 1M 2M' v2.qcow2 >/dev/null
qemu-img snapshot -c s2 v2.qcow2
cp v2.qcow2 v2old.qcow2
python3 - v2old.qcow2 <<'EOF' || fail "v2old.qcow2"
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
nb, so = struct.unpack('>IQ', b[60:72]); pos = so; out = bytearray()
for i in range(nb):
    pos = (pos + 7) & ~7
    idl, nl = struct.unpack('>HH', b[pos + 12:pos + 16]); ex = struct.unpack('>I', b[pos + 36:pos + 40])[0]
    e = bytearray(b[pos:pos + 40]); struct.pack_into('>I', e, 36, 0)
    e += b[pos + 40 + ex:pos + 40 + ex + idl + nl]
    e += b'\0' * (-len(e) % 8)
    out += e; pos += 40 + ex + idl + nl
b[so:pos] = out + b'\0' * (pos - so - len(out))
open(p, 'wb').write(b)
EOF
qemu-img check -q v2old.qcow2 || fail "v2old.qcow2 is not clean"
qemu-img create -q -f qcow2 -o compression_type=zstd zstd.qcow2 8M
qemu-img create -q -f qcow2 -o compression_type=zstd zstdc.qcow2 8M
qemu-io -c 'write -c -P 8 0 64k' zstdc.qcow2 >/dev/null
qemu-img create -q -f qcow2 -o extended_l2=on xl2.qcow2 8M
qemu-img create -q -f qcow2 -o lazy_refcounts=on lazy.qcow2 8M
qemu-img create -q -f qcow2 -o data_file=df.data,cluster_size=4k df.qcow2 8M
qemu-io -c 'write -P 9 0 1M' df.qcow2 >/dev/null
qemu-img create -q -f qcow2 -o data_file=dr.data,data_file_raw=on dr.qcow2 8M

# refcount widths (4 KiB clusters: qemu-img takes a second a change with
# 64 KiB ones): from 16 to every width (1: refused where a snapshot
# shares clusters), on the layout with several refcount blocks; one width
# on each other layout; from narrow and wide widths
for w in 1 2 4 8 32 64; do both refcount_bits=$w small.qcow2; done
both refcount_bits=64 top.qcow2
both refcount_bits=2 bm.qcow2
both refcount_bits=8 df.qcow2
qemu-img create -q -f qcow2 -o refcount_bits=2,cluster_size=4k w.qcow2 16M
qemu-io -c 'write -P 5 0 3M' -c 'write -c -P 6 8M 512k' w.qcow2 >/dev/null
both refcount_bits=64 w.qcow2
both compat=0.10,refcount_bits=16 w.qcow2

# compat: down (zero clusters expanded, bitmaps dropped), up, refused
for img in v3.qcow2 small.qcow2 top.qcow2 bm.qcow2 zstd.qcow2 zstdc.qcow2 xl2.qcow2 \
           lazy.qcow2 df.qcow2 w.qcow2; do
    both compat=0.10 $img
done
both compat=v2 v3.qcow2
for img in v2.qcow2 v2old.qcow2; do
    both compat=1.1 $img
    both compat=v3,lazy_refcounts=on,refcount_bits=4 $img
done
both refcount_bits=8 v2.qcow2
both lazy_refcounts=on v2.qcow2
# a v2 upgrade's snapshot entries as qemu-img completes them
cp v2old.qcow2 t.qcow2
"$DISKIMG" amend -o compat=1.1 t.qcow2 || fail "upgrade v2old"
qemu-img snapshot -l t.qcow2 | tail -n +3 > t.list
cp v2old.qcow2 q.qcow2; qemu-img amend -o compat=1.1 q.qcow2
qemu-img snapshot -l q.qcow2 | tail -n +3 > q.list
cmp -s q.list t.list || { diff q.list t.list; fail "upgraded snapshot entries differ"; }

# lazy refcounts, data file, backing file (qemu-img 7.2: unchanged only)
both lazy_refcounts=on v3.qcow2
both lazy_refcounts=off lazy.qcow2
both data_file=df.data df.qcow2
both data_file=x.data v3.qcow2
both data_file_raw=on df.qcow2
both data_file_raw=off dr.qcow2
both backing_file=base.qcow2,backing_fmt=qcow2 top.qcow2
both backing_file=base.qcow2 top.qcow2
both backing_file=other.qcow2,backing_fmt=qcow2,lazy_refcounts=on top.qcow2

# a new data file name: the header only; the folder rule
cp df.data other.data
cp df.qcow2 t.qcow2; cp df.qcow2 q.qcow2
"$DISKIMG" amend -o data_file=other.data t.qcow2 || fail "data_file=other.data"
qemu-img amend -o data_file=other.data q.qcow2 || fail "qemu-img data_file=other.data"
info q.qcow2 > q.info; info t.qcow2 > t.info
cmp -s q.info t.info || { diff q.info t.info; fail "data_file rename: info differs"; }
qcompare df.qcow2 t.qcow2
cp df.qcow2 t.qcow2
expect_error "outside" "$DISKIMG" amend -o data_file=../x.data t.qcow2
cmp -s df.qcow2 t.qcow2 || fail "a refused data file name changed the image"
expect_error "cannot be unnamed" "$DISKIMG" amend -o data_file= t.qcow2

# size: grow, shrink (qemu-img amend needs no --shrink), with a downgrade
# (qemu-img resizes first) and an upgrade (after)
both size=32M v3.qcow2
both size=4M top.qcow2
both size=2M,compat=0.10 small.qcow2
both size=16M,compat=1.1 v2.qcow2
both size=16M v2.qcow2
both size=1000 v3.qcow2

# a dirty image (lazy refcounts, killed writer) is refused, not repaired
cp lazy.qcow2 dirty.qcow2
printf '\x01' | dd of=dirty.qcow2 bs=1 seek=79 conv=notrunc status=none
expect_error "not closed cleanly" "$DISKIMG" amend -o lazy_refcounts=off dirty.qcow2

# wrong refcounts (an L2 table's set to 0) and a truncated image are
# refused before anything is written
cp small.qcow2 bad.qcow2
python3 - bad.qcow2 <<'EOF' || fail "bad.qcow2"
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
cb = struct.unpack('>I', b[20:24])[0]
l1o, rto = struct.unpack('>QQ', b[40:56])
l2 = struct.unpack('>Q', b[l1o:l1o + 8])[0] & 0x00fffffffffffe00
blk = struct.unpack('>Q', b[rto:rto + 8])[0]
struct.pack_into('>H', b, blk + 2 * (l2 >> cb), 0)
open(p, 'wb').write(b)
EOF
cp bad.qcow2 t.qcow2
for o in refcount_bits=8 compat=0.10 refcount_bits=64,lazy_refcounts=on; do
    expect_error "corruptions.*check -r all" "$DISKIMG" amend -o $o t.qcow2
    cmp -s bad.qcow2 t.qcow2 || fail "$o: a corrupt image was changed"
done
head -c 200k small.qcow2 > cut.qcow2
cp cut.qcow2 t.qcow2
expect_error "t.qcow2" "$DISKIMG" amend -o refcount_bits=8 t.qcow2
cmp -s cut.qcow2 t.qcow2 || fail "a truncated image was changed"

# the command line, as qemu-img (exit status, message, stdout)
qemu-img create -q -f qcow2 a.qcow2 8M
qemu-img create -q -f raw r.raw 1M
while read -r args; do
    cp a.qcow2 c.qcow2
    r1=0; r2=0
    eval "qemu-img amend $args" >q.out 2>q.err || r1=$?
    cp a.qcow2 c.qcow2
    eval "\"$DISKIMG\" amend $args" >t.out 2>t.err || r2=$?
    [ $r1 = $r2 ] || { cat q.err t.err; fail "amend $args: exit $r2, qemu-img $r1"; }
    cmp -s q.out t.out || { diff q.out t.out; fail "amend $args: stdout differs"; }
    [ "$(err_of q.err | grep -v 'image.*probing\|Automatically detecting\|Specify the .raw')" = "$(err_of t.err)" ] ||
        { cat q.err t.err; fail "amend $args: message differs"; }
done <<'EOF'
-o compat=1.1
-o compat=1.1 c.qcow2 c.qcow2
-f raw -o lazy_refcounts=on r.raw
-t bogus -o refcount_bits=16 c.qcow2
-o help
-f qcow2 -o help
-f raw -o help
-o compat=1.1,help c.qcow2
-o '?' c.qcow2
-o bogus=1 c.qcow2
-o cluster_size=4k c.qcow2
-o compression_type=zstd c.qcow2
-o refcount_bits=abc c.qcow2
-o refcount_bits=3 c.qcow2
-o refcount_bits=-16 c.qcow2
-o refcount_bits=18446744073709551632 c.qcow2
-o refcount_bits=0x10 c.qcow2
-o lazy_refcounts=ON c.qcow2
-o lazy_refcounts=yes c.qcow2
-o size=abc c.qcow2
-o compat=0.9 c.qcow2
-o data_file_raw c.qcow2
-o encrypt.state=active c.qcow2
-o encrypt.keyslot=x c.qcow2
-o "" c.qcow2
-q -o compat=1.1 -o refcount_bits=8 c.qcow2
--object secret,id=s0,data=x --force -o lazy_refcounts=on c.qcow2
--image-opts -o lazy_refcounts=on driver=qcow2,file.filename=c.qcow2
EOF
expect_error "Must specify options" "$DISKIMG" amend a.qcow2
"$DISKIMG" amend --help | grep -q "^Usage: diskimg amend" || fail "amend --help"
echo "amend: ok"
