#!/bin/bash
# A safe rebase of a damaged VMDK writes nothing: the image check runs
# first (what `diskimg check` reports as corruption is refused), and so are
# images whose new grains would land in something the image names.  New
# grains go at the end of the extent file, so:
#   - a grain table entry pointing at the end of the file (the first new
#     grain would go there, and that entry would then read it), past it, or
#     into the grain directory;
#   - a redundant grain table past the end of the file (once the file grows,
#     the reader counts it over the new grains);
#   - an embedded descriptor or a grain directory running past the end;
#   - one sparse extent file named twice under two spellings (s-s001.vmdk,
#     ./s-s001.vmdk: both extents would append at the same offsets).
# Each refusal names the file, the offset and the problem; every file stays
# byte for byte as it was, and no temporary file is left.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
cd "$T" || fail "cd"

u64() { python3 -c 'import struct,sys; print(struct.unpack_from("<Q", open(sys.argv[1], "rb").read(), int(sys.argv[2]))[0])' "$1" "$2"; }
u32() { python3 -c 'import struct,sys; print(struct.unpack_from("<I", open(sys.argv[1], "rb").read(), int(sys.argv[2]))[0])' "$1" "$2"; }
# put FILE OFFSET FORMAT VALUE: a little-endian field
put() {
    python3 -c 'import struct,sys
f, o, fmt, v = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
d = bytearray(open(f, "rb").read()); struct.pack_into("<" + fmt, d, o, v); open(f, "wb").write(d)' \
        "$1" "$2" "$3" "$4" || fail "put $*"
}

qemu-img create -q -f vmdk b.vmdk 8M
qemu-io -f vmdk -c 'write -P 17 0 1M' -c 'write -P 18 5M 128k' b.vmdk >/dev/null
# child NAME [SIZE]: a child of b.vmdk with one grain of its own (at 2M)
child() {
    rm -f "$1"
    qemu-img create -q -f vmdk -b b.vmdk -F vmdk "$1" ${2:-} || fail "qemu-img create $1"
    qemu-io -f vmdk -c 'write -P 51 2M 64k' "$1" >/dev/null || fail "qemu-io $1"
}

# the sound image is rebased (the refusals below are the damage alone)
child c.vmdk
qemu-img convert -O raw c.vmdk c.raw
ok "$DISKIMG" rebase -b "" c.vmdk
qemu-img check -q c.vmdk || fail "c.vmdk: qemu-img check after the rebase"
qcompare c.vmdk c.raw

# grain table entries: grain 5 (LBA 640, which the parent holds and the
# child does not) at the end of the file, past it, in the grain directory
for how in end past gd; do
    child g.vmdk
    gd=$(( $(u64 g.vmdk 56) * 512 ))
    gt=$(( $(u32 g.vmdk "$gd") * 512 ))
    size=$(stat -c %s g.vmdk)
    case $how in
        end) to=$((size / 512)) why="points to offset $size, past the end of the file \\($size bytes\\)" ;;
        past) to=$((size / 512 + 64)) why="points to offset $((size + 32768)), past the end of the file" ;;
        gd) to=$((gd / 512)) why="at offset $gd \\(65536 bytes\\) overlaps the grain directory" ;;
    esac
    put g.vmdk $((gt + 5 * 4)) I "$to"
    "$DISKIMG" check g.vmdk >/dev/null 2>&1 && fail "$how: diskimg check finds nothing"
    vmdk_refused "g\\.vmdk: grain (table entry )?for LBA 640 $why.*; the image is damaged \\(see diskimg check\\): not writing into it \\(offset $((gt + 20))\\)" \
        "$DISKIMG" rebase -b "" g.vmdk
done

# a redundant grain table past the end of the file (the fourth of a 100M
# child: its grains are never written by the rebase)
child r.vmdk 100M
rgd=$(( $(u64 r.vmdk 48) * 512 ))
size=$(stat -c %s r.vmdk)
put r.vmdk $((rgd + 3 * 4)) I $((size / 512))
ok "$DISKIMG" check r.vmdk >/dev/null
vmdk_refused "r\\.vmdk: redundant grain directory entry 3 names a grain table at offset $size that runs past the end of the file \\($size bytes\\): new grains would go into it \\(offset $((rgd + 12))\\)" \
    "$DISKIMG" rebase -b "" r.vmdk

# the redundant grain directory past the end of the file
child r2.vmdk
size=$(stat -c %s r2.vmdk)
put r2.vmdk 48 Q $((size / 512 + 1))
ok "$DISKIMG" info r2.vmdk >/dev/null
vmdk_refused "r2\\.vmdk: the redundant grain directory at offset $((size + 512)) \\(4 bytes\\) runs past the end of the file \\($size bytes\\): new grains would go into it \\(offset 48\\)" \
    "$DISKIMG" rebase -b "" r2.vmdk

# one extent file under two names: guest 0-4M and 4-8M both from
# s-s001.vmdk, each extent appending grains of its own
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse -b b.vmdk -F vmdk s.vmdk ||
    fail "qemu-img create s.vmdk"
sed -i 's|^RW 16384 SPARSE "s-s001.vmdk"$|RW 8192 SPARSE "s-s001.vmdk"\nRW 8192 SPARSE "./s-s001.vmdk"|' s.vmdk
grep -q '"./s-s001.vmdk"' s.vmdk || fail "s.vmdk: the extent lines were not rewritten"
ok "$DISKIMG" info s.vmdk >/dev/null
vmdk_refused "s-s001\\.vmdk: the sparse extent's file is also the file of extent 2: it cannot be written in place" \
    "$DISKIMG" rebase -b "" s.vmdk
echo "rebase-vmdk-damaged: ok"
