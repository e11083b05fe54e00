#!/bin/bash
# A streamOptimized VMDK that was cut short (`curl ... | diskimg convert -`
# when the network drops) is an error naming the offset, from a pipe and
# from the file, with no output left; never zeros where the lost grains
# were.  The stream is cut at each object boundary (grain, table, directory,
# footer and end-of-stream markers, so that no grain is half there) of:
#   footer - diskimg's output: grain directory at the end (the header says
#            so), then footer and end-of-stream marker;
#   named  - the same, the header naming the directory (no footer);
#   qemu   - qemu-img's output: directory and tables before the grains.
# One rule decides for both readings that walk the markers (a pipe, or a
# file without a usable directory): a stream is whole when it ends with its
# end-of-stream marker (after the footer, where the header promises one),
# or, with no marker, when a directory read before the grains lists nothing
# past the end (qemu-img writes no marker after an incompressible last
# grain: cutting the zero sector that stands for it loses nothing).  A file
# whose header names a whole directory is read through it, marker or not.
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3
cd "$T" || fail "cd"

gen -s 41 -m 4K -M 64K 1M src.raw
head -c 65536 /dev/urandom | dd of=src.raw bs=64K seek=15 conv=notrunc status=none
ok "$DISKIMG" convert -O vmdk -o subformat=streamOptimized src.raw footer.vmdk
qemu-img convert -f raw -O vmdk -o subformat=streamOptimized src.raw qemu.vmdk ||
    fail "qemu-img convert"

# objects FILE: the byte offset of every object after the grains' start, and
# the file size last
objects() {
    python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
pos = struct.unpack_from("<Q", b, 64)[0] * 512
while pos + 16 <= len(b):
    print(pos)
    lba, size = struct.unpack_from("<QI", b, pos)
    if size:
        pos += (12 + size + 511) // 512 * 512
        continue
    if struct.unpack_from("<I", b, pos + 12)[0] == 0:
        break
    pos += 512 + lba * 512
print(len(b))
PY
}

# the header names the directory the footer names: no footer needed
python3 - footer.vmdk named.vmdk <<'PY' || fail "named layout"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
footer = b[-1024:-512]
gd = struct.unpack_from("<Q", footer, 56)[0]
struct.pack_into("<Q", b, 56, gd)
b[-1536:-512] = b""                     # footer marker and footer
open(sys.argv[2], "wb").write(b)
PY
for img in footer named qemu; do
    qemu-img compare -q -f vmdk -F raw $img.vmdk src.raw || fail "$img: qemu-img reads it otherwise"
done

# cut_fails IMG LEN [file-reads]: the reading of its first LEN bytes from a
# pipe fails, and from the file too (file-reads: the file reads right, its
# directory being whole), nothing left behind
cut_fails() {
    local img=$1 len=$2
    rm -f out.raw
    head -c "$len" "$img.vmdk" > cut.vmdk
    if [ "${3:-}" = file-reads ]; then
        ok "$DISKIMG" convert -O raw cut.vmdk out.raw
        cmp out.raw src.raw || fail "$img cut at $len: the file reads wrong"
        rm -f out.raw
    else
        expect_error "cut.vmdk: .*(offset [0-9]+)" "$DISKIMG" convert -O raw cut.vmdk out.raw
        [ -e out.raw ] && fail "$img cut at $len: file reading left output"
    fi
    expect_error "\(stdin\): .*(truncated|past the end|without the footer).*\(offset $len\)" \
        "$DISKIMG" convert -O raw - out.raw < <(cat cut.vmdk)
    [ -e out.raw ] && fail "$img cut at $len: pipe reading left output"
    return 0
}

n=0
for img in footer named; do
    mapfile -t offs < <(objects $img.vmdk)
    last=${offs[${#offs[@]} - 1]}
    [ ${#offs[@]} -ge 6 ] || fail "$img: only ${#offs[@]} objects"
    # every boundary up to and including the end-of-stream marker itself;
    # a file whose header names its directory needs no marker: only the
    # pipe, which cannot read that directory before the grains, refuses it
    eos=${offs[${#offs[@]} - 2]}
    for len in "${offs[@]:0:${#offs[@]} - 1}"; do
        if [ $img = named ] && [ "$len" = "$eos" ]; then
            cut_fails $img "$len" file-reads
        else
            cut_fails $img "$len"
        fi
        n=$((n + 1))
    done
    # whole: reads right both ways
    rm -f out.raw
    ok "$DISKIMG" convert -O raw - out.raw < <(cat $img.vmdk)
    cmp out.raw src.raw || fail "$img from a pipe: wrong content"
    [ "$last" = "$(stat -c %s $img.vmdk)" ] || fail "$img: objects"
done
# qemu-img's layout: every cut before the last grain's end fails
mapfile -t offs < <(objects qemu.vmdk)
for len in "${offs[@]:0:${#offs[@]} - 1}"; do
    [ "$len" -ge "$(stat -c %s qemu.vmdk)" ] && break
    cut_fails qemu "$len"
    n=$((n + 1))
done
[ $n -ge 20 ] || fail "only $n cuts tried"
# ... and the qemu file whose last grain is incompressible ends without a
# marker: whole, from a pipe too
python3 - qemu.vmdk <<'PY' || fail "qemu layout"
import struct, sys
b = open(sys.argv[1], "rb").read()
pos = struct.unpack_from("<Q", b, 64)[0] * 512
while pos + 12 <= len(b) and struct.unpack_from("<I", b, pos + 8)[0]:
    pos += (12 + struct.unpack_from("<I", b, pos + 8)[0] + 511) // 512 * 512
assert pos == len(b), "qemu-img wrote something after the last grain"
PY
rm -f out.raw
ok "$DISKIMG" convert -O raw - out.raw < <(cat qemu.vmdk)
cmp out.raw src.raw || fail "qemu layout from a pipe: wrong content"

# the VMware files still read: their end-of-stream markers are there
S=$SHARED/samples/vmdk/vmdk-rs
if [ -f "$S/streamOptimizedWithMarkers.vmdk" ]; then
    rm -f out.raw
    ok "$DISKIMG" convert -O raw - out.raw < <(cat "$S/streamOptimizedWithMarkers.vmdk")
    [ "$(sha1sum < out.raw | cut -d' ' -f1)" = b6fd01dd1b93b3589e6d76f7507af55c589ef69d ] ||
        fail "streamOptimizedWithMarkers.vmdk from a pipe: wrong content"
    # cut before its end-of-stream marker
    size=$(stat -c %s "$S/streamOptimizedWithMarkers.vmdk")
    head -c $((size - 512)) "$S/streamOptimizedWithMarkers.vmdk" > cut.vmdk
    expect_error 'truncated|without' "$DISKIMG" convert -O raw - out2.raw < <(cat cut.vmdk)
    [ -e out2.raw ] && fail "VMware stream without its end-of-stream marker: output left"
fi
exit 0
