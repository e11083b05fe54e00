#!/bin/bash
# Damaged and hostile VHDs are refused with the file, offset and problem
# named, no output left: a truncated file, a BAT entry over the header or
# past the end, a BAT past the end or over the header, a huge entry count,
# a block size that is not a power of two, a header checksum mismatch, a
# fixed disk whose footer claims more than the file holds, a locator that
# is not inside the file.  A damaged last footer of a dynamic disk is
# replaced by the copy at offset 0, with a warning (convert, info, map,
# compare, measure).  Files named .vhd,
# .vhdx or .vdi that match no format are not read as raw.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3

# patch FILE WHAT OFF HEX: write bytes at OFF (of the footer copy and the
# last footer when WHAT=footer, relative to the header at 512 when
# WHAT=header), then make the checksums right again
patch() {
    python3 - "$@" <<'PY'
import sys, struct, os
path, what, off, data = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), bytes.fromhex(sys.argv[4])
f = open(path, 'r+b'); size = os.path.getsize(path)
def fix(base, n, ck):
    f.seek(base); b = bytearray(f.read(n)); b[ck:ck + 4] = b'\0' * 4
    struct.pack_into('>I', b, ck, (~sum(b)) & 0xffffffff); f.seek(base); f.write(b)
if what == 'footer':
    for base in (0, size - 512):
        f.seek(base + off); f.write(data); fix(base, 512, 64)
elif what == 'header':
    f.seek(512 + off); f.write(data); fix(512, 1024, 36)
else:
    f.seek(off); f.write(data)
PY
}
fresh() {   # fresh NAME: a 4 MiB dynamic disk with two allocated blocks
    rm -f "$T/$1"
    qemu-img create -q -f vpc "$T/$1" 4M
    qemu-io -f vpc -c "write -P 0x61 0 64k" -c "write -P 0x62 2M 64k" "$T/$1" > /dev/null
}
refused() {   # refused REGEX IMAGE
    expect_error "$1" "$DISKIMG" convert -O raw "$2" "$T/out.raw"
    [ ! -e "$T/out.raw" ] || fail "output left for $2"
    expect_error "$1" "$DISKIMG" map "$2"
}

fresh a.vhd
size=$(stat -c %s "$T/a.vhd")
# truncated: the footer goes with the end of the second block
head -c $((size - 512 - 4096)) "$T/a.vhd" > "$T/trunc.vhd"
tail -c 512 "$T/a.vhd" >> "$T/trunc.vhd"
refused "block 1 at [0-9]+ is past the end of the data.*truncated" "$T/trunc.vhd"
head -c 100000 "$T/a.vhd" > "$T/cut.vhd"
refused "footer checksum|cookie|past the end" "$T/cut.vhd"

# BAT entry 0 -> sector 1 (the dynamic header)
fresh b.vhd; patch "$T/b.vhd" raw 1536 00000001
refused "block 0 at 512 overlaps the (dynamic disk header|block allocation table)" "$T/b.vhd"
# BAT entry 1 far past the end
fresh c.vhd; patch "$T/c.vhd" raw 1540 7fffff00
refused "block 1 at .* is past the end of the data" "$T/c.vhd"
# the BAT past the end, over the header, or with 2^31 entries
fresh d.vhd; patch "$T/d.vhd" header 16 0000000100000000
refused "block allocation table .* past the end" "$T/d.vhd"
fresh e.vhd; patch "$T/e.vhd" header 16 0000000000000200
refused "block allocation table overlaps the dynamic disk header" "$T/e.vhd"
fresh f.vhd; patch "$T/f.vhd" header 28 7fffffff
refused "block allocation table of .* past the end" "$T/f.vhd"
fresh g.vhd; patch "$T/g.vhd" header 32 00000bb8
refused "block size 3000 is not a power of two" "$T/g.vhd"
fresh h.vhd; patch "$T/h.vhd" header 28 00000001
refused "block allocation table of 1 entries is too small" "$T/h.vhd"
fresh i.vhd; printf '\1' | dd of="$T/i.vhd" bs=1 seek=600 conv=notrunc status=none
refused "dynamic disk header checksum mismatch" "$T/i.vhd"
# header offset past the end
fresh j.vhd; patch "$T/j.vhd" footer 16 0000000010000000
refused "dynamic disk header of 1024 bytes .* past the end" "$T/j.vhd"

# a damaged last footer: the copy at 0 stands in, with a warning
fresh k.vhd
printf 'X' | dd of="$T/k.vhd" bs=1 seek=$((size - 400)) conv=notrunc status=none
"$DISKIMG" convert -O raw "$T/k.vhd" "$T/k.raw" 2> "$T/err" || { cat "$T/err"; fail "copy not used"; }
grep -q "using the footer copy at offset 0" "$T/err" || fail "no warning"
qemu-img convert -f vpc -O raw "$T/a.vhd" "$T/a.raw"
cmp "$T/k.raw" "$T/a.raw" || fail "read through the copy differs"
"$DISKIMG" check "$T/k.vhd" > /dev/null 2>&1 && fail "check finds nothing wrong"
# info, map, compare and measure say so too: once, on stderr (stdout as
# for the intact image)
for c in "info --output=json" "map --output=json" "compare -f vpc -F raw @ $T/a.raw" \
         "measure -O qcow2"; do
    a=${c//@/$T/a.vhd}; k=${c//@/$T/k.vhd}
    [ "$a" = "$c" ] && a="$c $T/a.vhd" k="$c $T/k.vhd"
    "$DISKIMG" $a > "$T/a.out" 2> "$T/a.err" || fail "$a"
    "$DISKIMG" $k > "$T/k.out" 2> "$T/err" || { cat "$T/err"; fail "$k"; }
    [ "$(grep -c "^diskimg: warning: $T/k.vhd: footer checksum mismatch (stored [0-9a-f]*, computed [0-9a-f]*); using the footer copy at offset 0 (offset $((size - 512)))\$" "$T/err")" = 1 ] &&
        [ "$(wc -l < "$T/err")" = 1 ] || { cat "$T/err"; fail "$k: not one warning"; }
    [ -s "$T/a.err" ] && fail "$a: $(cat "$T/a.err")"
    sed "s#$T/k.vhd#$T/a.vhd#" "$T/k.out" | diff "$T/a.out" - || fail "$k: stdout differs"
done
"$DISKIMG" compare -q "$T/k.vhd" "$T/a.raw" 2> "$T/err" || fail "compare -q"
[ -s "$T/err" ] && fail "compare -q: $(cat "$T/err")"

# fixed: the footer claims more than the file holds
qemu-img create -q -f vpc -o subformat=fixed "$T/x.vhd" 1M
python3 - "$T/x.vhd" <<'PY'
import sys, struct, os
p = sys.argv[1]; f = open(p, 'r+b'); f.seek(-512, 2); b = bytearray(f.read())
struct.pack_into('>QQ', b, 40, 8 << 20, 8 << 20); b[28:32] = b'win '
b[64:68] = b'\0' * 4; struct.pack_into('>I', b, 64, (~sum(b)) & 0xffffffff)
f.seek(-512, 2); f.write(b)
PY
# (not probed: the size is not the file's; by name not raw either)
expect_error "named like a vhd image" "$DISKIMG" convert -O raw "$T/x.vhd" "$T/out.raw"
expect_error "fixed disk of 8388608 bytes in a file of .*truncated" \
    "$DISKIMG" convert -f vpc -O raw "$T/x.vhd" "$T/out.raw"

# a differencing disk whose locator points past the end of the file
python3 "$TOP/tests/tools/vhdmake.py" "$T/p.vhd" --type dynamic --size 1048576 || fail vhdmake
python3 "$TOP/tests/tools/vhdmake.py" "$T/l.vhd" --type diff --size 1048576 --parent "$T/p.vhd" \
    --loc 'W2ru:.\p.vhd' || fail vhdmake
python3 - "$T/l.vhd" <<'PY'
import sys, struct
p = sys.argv[1]; f = open(p, 'r+b'); f.seek(512); h = bytearray(f.read(1024))
struct.pack_into('>Q', h, 576 + 16, 1 << 40)
h[36:40] = b'\0' * 4; struct.pack_into('>I', h, 36, (~sum(h)) & 0xffffffff)
f.seek(512); f.write(h)
PY
refused "parent locator 0: .* not inside the file" "$T/l.vhd"

# named like a format but nothing matches: refused, not read as raw
head -c 65536 /dev/urandom > "$T/r.vhd"
for ext in vhd vhdx vdi VHD; do
    cp "$T/r.vhd" "$T/named.$ext"
    expect_error "named like a $ext image|named like a vhd image.*pass -f raw" \
        "$DISKIMG" convert -O qcow2 "$T/named.$ext" "$T/o.qcow2"
done
ok "$DISKIMG" convert -f raw -O raw "$T/named.vhd" "$T/o.raw"
echo ok
