#!/bin/bash
# Damaged or hostile sparse extents: every header field, table entry and
# grain marker out of range is refused (exit 1) with a message naming the
# problem; nothing past the end of the file is read as zeros.
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3
cd "$T" || fail "cd"

gen -s 51 -m 4K -M 128K 2M src.raw
qemu-img convert -q -f raw -O vmdk src.raw good.vmdk || fail "qemu-img"
qemu-img convert -q -f raw -O vmdk -o subformat=streamOptimized src.raw so.vmdk || fail "qemu-img"
ok "$DISKIMG" convert -O raw good.vmdk o.raw && cmp src.raw o.raw || fail "good.vmdk"
rm -f o.raw

# bad NAME BASE REGEX OFFSET FORMAT VALUE...: patch a copy, expect a refusal
bad() {
    local name=$1 base=$2 re=$3; shift 3
    cp "$base" "$name.vmdk"
    while [ $# -gt 0 ]; do
        python3 -c 'import struct,sys
f,o,fmt,v=sys.argv[1],int(sys.argv[2],0),sys.argv[3],int(sys.argv[4],0)
d=bytearray(open(f,"rb").read()); struct.pack_into("<"+fmt,d,o,v); open(f,"wb").write(d)' \
            "$name.vmdk" "$1" "$2" "$3" || fail "patch $name"
        shift 3
    done
    expect_error "$name.vmdk: .*$re" "$DISKIMG" convert -O raw "$name.vmdk" out.raw
    [ ! -e out.raw ] || fail "$name: an output was left behind"
}

# header fields (KDMV: version 4, flags 8, capacity 12, grain 20, desc 28/36,
# gtes 44, gd 56, overhead 64, newline check 73, compression 77)
bad version good.vmdk 'sparse extent version 4 is not supported' 4 I 4
bad flags good.vmdk 'unknown incompatible flags 0x00040000' 8 I 0x40003
bad grain100 good.vmdk 'grain size of 100 sectors is invalid' 20 Q 100
bad grainhuge good.vmdk 'grain size of 1048576 sectors is invalid' 20 Q 0x100000
bad grain0 good.vmdk 'grain size of 0 sectors is invalid' 20 Q 0
bad gtes0 good.vmdk '0 entries per grain table is out of range' 44 I 0
bad gteshuge good.vmdk '100000 entries per grain table is out of range' 44 I 100000
bad capacity good.vmdk 'capacity of 1125899906842624 sectors is too large' 12 Q 0x4000000000000
bad tables good.vmdk 'needs 1073741824 grain tables' 12 Q 0x40000000 20 Q 1 44 I 1
bad newline good.vmdk 'line-end check bytes are damaged' 75 B 0x0a
bad compress good.vmdk 'compression algorithm 2 is not supported' 77 H 2
bad descsize good.vmdk 'embedded descriptor of 1048576 sectors is out of range' 36 Q 0x100000
bad descoff good.vmdk 'embedded descriptor at offset .* runs past the end of the file' 28 Q 100000
bad gdzero good.vmdk 'grain directory offset 0 sectors is invalid' 56 Q 0
bad gdoff good.vmdk 'grain directory at offset 536870912 .* runs past the end of the file' 56 Q 0x100000 48 Q 0x100001
# a redundant directory offset whose byte offset wraps (2^60 sectors: 2^69
# bytes, read at 0 before)
bad rgdwrap good.vmdk 'redundant grain directory offset 1152921504606846977 sectors is invalid' \
    48 Q 0x1000000000000001

# grain directory and grain table entries
gd=$(python3 -c 'import struct;print(struct.unpack_from("<Q",open("good.vmdk","rb").read(),56)[0]*512)')
gt=$(python3 -c "import struct;print(struct.unpack_from('<I',open('good.vmdk','rb').read(),$gd)[0]*512)")
# a damaged primary directory with an intact redundant one (qemu-img: GD at
# sector 21 would be the redundant one here, the primary further on)
rgd=$(python3 -c 'import struct;print(struct.unpack_from("<Q",open("good.vmdk","rb").read(),48)[0]*512)')
cp good.vmdk rgd.vmdk
python3 -c "import struct
d=bytearray(open('rgd.vmdk','rb').read()); struct.pack_into('<I',d,$gd,0x400000); open('rgd.vmdk','wb').write(d)"
ok "$DISKIMG" convert -O raw rgd.vmdk out.raw
cmp src.raw out.raw || fail "redundant grain directory: wrong content"
rm -f out.raw
python3 -c "import struct
d=bytearray(open('rgd.vmdk','rb').read()); struct.pack_into('<I',d,$rgd,0x400000); open('rgd.vmdk','wb').write(d)"
expect_error "rgd.vmdk: grain directory entry 0 points to a grain table at offset 2147483648" \
    "$DISKIMG" convert -O raw rgd.vmdk out.raw
bad gdentry good.vmdk "grain directory entry 0 points to a grain table at offset 2147483648, past the end" \
    $gd I 0x400000 $rgd I 0x400000
bad gtentry good.vmdk "grain table entry for LBA 128 points to offset 1073741824, past the end" $((gt + 4)) I 0x200000
# the file cut short: the last grains are gone
cp good.vmdk cut.vmdk && truncate -s -100K cut.vmdk
expect_error 'cut.vmdk: .*past the end of the file' "$DISKIMG" convert -O raw cut.vmdk out.raw
# only the header
head -c 300 good.vmdk > tiny.vmdk
expect_error 'tiny.vmdk: .*truncated' "$DISKIMG" convert -O raw tiny.vmdk out.raw

# streamOptimized grains: qemu-img puts the first grain at 64 KiB
lba=$(python3 -c 'import struct;print(struct.unpack_from("<Q",open("so.vmdk","rb").read(),65536)[0])')
bad csize so.vmdk "compressed grain for LBA $lba claims 2147483647 bytes \\(max 74752\\)" 65544 I 0x7fffffff
bad lba so.vmdk "grain at offset 65536 holds LBA $((lba + 1024)), but the grain table maps it to LBA $lba" \
    65536 Q $((lba + 1024))
bad zhdr so.vmdk 'compressed grain does not start with a zlib header' 65548 I 0x12345678
bad zlib so.vmdk 'compressed grain is corrupt \(zlib: invalid block type\)' 65550 B 0x07
# the Adler-32 after the deflate data: its last byte changed
tail_at=$(python3 -c 'import struct;d=open("so.vmdk","rb").read();print(65548+struct.unpack_from("<I",d,65544)[0]-1)')
tail_byte=$(python3 -c "print(open('so.vmdk','rb').read()[$tail_at] ^ 1)")
bad adler so.vmdk 'compressed grain is corrupt \(checksum mismatch\)' $tail_at B $tail_byte
# cut inside the last grain
last=$(python3 -c '
import struct
d = open("so.vmdk", "rb").read(); off = 65536; last = 0
while off + 12 <= len(d):
    lba, size = struct.unpack_from("<QI", d, off)
    if size == 0: break
    last = off; off += (12 + size + 511) // 512 * 512
print(last)')
head -c $((last + 100)) so.vmdk > cpast.vmdk
expect_error "cpast.vmdk: compressed grain of [0-9]+ bytes at offset $last runs past the end" \
    "$DISKIMG" convert -O raw cpast.vmdk out.raw
# the same from a pipe: found while walking the markers
expect_error 'claims 2147483647 bytes' "$DISKIMG" convert -O raw - out.raw < <(cat csize.vmdk)
cp so.vmdk ms.vmdk
python3 -c 'import struct
d=bytearray(open("ms.vmdk","rb").read()); struct.pack_into("<QII",d,65536,0,0,9); open("ms.vmdk","wb").write(d)'
expect_error 'unknown marker type 9' "$DISKIMG" convert -O raw - out.raw < <(cat ms.vmdk)
cp so.vmdk ml.vmdk
python3 -c 'import struct
d=bytearray(open("ml.vmdk","rb").read()); struct.pack_into("<Q",d,65536,100); open("ml.vmdk","wb").write(d)'
expect_error 'grain marker has LBA 100, not a multiple of the grain size' \
    "$DISKIMG" convert -O raw - out.raw < <(cat ml.vmdk)
python3 -c 'import struct
d=bytearray(open("ml.vmdk","rb").read()); struct.pack_into("<Q",d,65536,1<<30); open("ml.vmdk","wb").write(d)'
expect_error 'grain marker has LBA 1073741824, beyond the capacity' \
    "$DISKIMG" convert -O raw - out.raw < <(cat ml.vmdk)
# a sparse (not stream) VMDK from a pipe
expect_error 'needs a seekable input' "$DISKIMG" convert -O raw - out.raw < <(cat good.vmdk)
exit 0
