#!/bin/bash
# Hand-written descriptors (cases qemu-img 7.2 gets wrong or cannot make):
# FLAT-with-offset, RDONLY, NOACCESS and ZERO extents mixed with a sparse
# one; CRLF lines with blank lines; lower-case keywords; no signature line.
# Expected content is assembled with dd from the extent files.  Then the
# refusals: no extents, bad lines, references leaving the folder, too many
# extents, oversized descriptor, short flat file, seSparse.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || fail "cd"

gen -s 21 -m 4K -M 128K 1M a.bin
gen -s 22 -m 4K -M 128K 2M b.bin
gen -s 23 -m 4K -M 128K 1M s.raw
qemu-img convert -q -f raw -O vmdk s.raw s.vmdk || fail "qemu-img convert"

# expected: a[0,1M) zeros(512K) b[1M,2M) s.raw zeros(256K) b[0,512K)
{
    cat a.bin
    head -c 524288 /dev/zero
    tail -c 1048576 b.bin
    cat s.raw
    head -c 262144 /dev/zero
    head -c 524288 b.bin
} > want.raw

write_desc() {  # FILE EOL KEYWORD-CASE
    local eol=$1 lc=$2
    {
        echo "# Disk DescriptorFile"
        echo ""
        echo "version=1"
        echo "CID=fffffffe"
        echo "   parentCID = ffffffff   "
        echo "createType=\"monolithicFlat\""
        echo ""
        echo "# Extent description"
        echo "RW 2048 FLAT \"a.bin\" 0"
        echo "RDONLY 1024 ZERO"
        echo "RDONLY 2048 FLAT \"b.bin\" 2048"
        echo "RW 2048 SPARSE \"s.vmdk\""
        echo "NOACCESS 512 ZERO"
        echo "RW   1024   FLAT   \"b.bin\"   0"
        echo ""
        echo "ddb.adapterType = \"lsilogic\""
    } | if [ "$lc" = lower ]; then
        sed -e 's/^RW/rw/; s/^RDONLY/rdonly/; s/^NOACCESS/noaccess/; s/FLAT/flat/; s/ZERO/zero/' \
            -e 's/SPARSE/sparse/; s/createType/createtype/; s/CID/cid/'
    else cat; fi | if [ "$eol" = crlf ]; then sed 's/$/\r/'; else cat; fi
}

readback() {  # DESC LABEL
    rm -f out.raw
    ok "$DISKIMG" convert -O raw "$1" out.raw
    cmp want.raw out.raw || fail "$2: wrong content"
    "$DISKIMG" info --output=json "$1" > info.json || fail "$2: info"
    grep -q '"virtual-size": 4456448' info.json || fail "$2: virtual size"
}

write_desc lf upper > d1.vmdk
readback d1.vmdk "mixed extents"
write_desc crlf upper > d2.vmdk
readback d2.vmdk "CRLF with blank lines"
write_desc lf lower > d3.vmdk
readback d3.vmdk "lower-case keywords"
write_desc crlf lower | grep -v '^# Disk' > d4.img      # no signature, no .vmdk name
readback d4.img "no signature line"
grep -q '"create-type": "monolithicFlat"' info.json || fail "create-type"
grep -q '"format": "ZERO"' info.json || fail "ZERO extent not in info"
# the text ends at the first NUL: whatever follows it (a reused buffer's
# leftovers) is not part of the descriptor ...
{ write_desc lf upper; printf '\0\001\002left over\n\377'; } > d5.vmdk
readback d5.vmdk "bytes after the NUL"
# ... but without the signature line such a file is not taken for one
{ write_desc lf upper | grep -v '^# Disk'; printf '\0\001\002left over\n\377'; } > d6.vmdk
expect_error 'd6.vmdk: named like a vmdk image but no known format signature.*-f raw' \
    "$DISKIMG" convert -O raw d6.vmdk o.raw

# --- refusals ------------------------------------------------------------------
printf '# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\ncreateType="monolithicFlat"\n' > none.vmdk
expect_error 'none.vmdk: descriptor lists no extents' "$DISKIMG" convert -O raw none.vmdk o.raw

write_desc lf upper | sed 's/^RDONLY 1024 ZERO/this line is nonsense/' > bad1.vmdk
expect_error 'bad1.vmdk: descriptor line 10: neither a key=value nor an extent' \
    "$DISKIMG" convert -O raw bad1.vmdk o.raw
write_desc lf upper | sed 's/^RDONLY 1024 ZERO/RW 1x24 FLAT "a.bin" 0/' > bad2.vmdk
expect_error 'descriptor line 10: extent size is not a number' "$DISKIMG" convert -O raw bad2.vmdk o.raw
write_desc lf upper | sed 's/^RDONLY 1024 ZERO/RW 1024 FLOPPY "a.bin"/' > bad3.vmdk
expect_error 'descriptor line 10: unknown extent type' "$DISKIMG" convert -O raw bad3.vmdk o.raw
write_desc lf upper | sed 's/^RDONLY 1024 ZERO/RW 1024 FLAT/' > bad4.vmdk
expect_error 'descriptor line 10: extent has no file name' "$DISKIMG" convert -O raw bad4.vmdk o.raw
write_desc lf upper | sed 's/^RDONLY 1024 ZERO/RW 1024 FLAT "a.bin/' > bad5.vmdk
expect_error 'descriptor line 10: file name has no closing quote' "$DISKIMG" convert -O raw bad5.vmdk o.raw
write_desc lf upper | sed 's/^CID=fffffffe/CID=xyz/' > bad6.vmdk
expect_error 'descriptor line 4: CID is not 1..8 hex digits' "$DISKIMG" convert -O raw bad6.vmdk o.raw
printf 'RW 99999999999999999999 FLAT "a.bin" 0\n' > bad7.vmdk
expect_error 'extent size is not a number of sectors' "$DISKIMG" convert -O raw bad7.vmdk o.raw

# flat file shorter than its extent: an error naming the offset, not zeros
printf 'RW 4096 FLAT "a.bin" 0\n' > short.vmdk
expect_error 'a.bin: flat extent needs 2097152 bytes at offset 0, but the file has only 1048576' \
    "$DISKIMG" convert -O raw short.vmdk o.raw
printf 'RW 2048 FLAT "a.bin" 1\n' > short2.vmdk
expect_error 'flat extent needs 1048576 bytes at offset 512' "$DISKIMG" convert -O raw short2.vmdk o.raw

# references leaving the image's folder
mkdir -p sub
printf 'RW 2048 FLAT "../a.bin" 0\n' > sub/up.vmdk
expect_error 'outside the image.s folder.*allow-external' "$DISKIMG" convert -O raw sub/up.vmdk o.raw
rm -f o.raw
ok "$DISKIMG" convert --allow-external -O raw sub/up.vmdk o.raw
cmp a.bin o.raw || fail "--allow-external: wrong content"
printf 'RW 1 FLAT "/etc/passwd" 0\n' > abs.vmdk
expect_error 'outside the image.s folder' "$DISKIMG" convert -O raw abs.vmdk o2.raw
printf 'RW 1 FLAT "missing.bin" 0\n' > missing.vmdk
expect_error "refers to 'missing.bin', which does not exist" "$DISKIMG" convert -O raw missing.vmdk o2.raw

# thousands of extents: bounded
{ echo '# Disk DescriptorFile'; for i in $(seq 1 9000); do echo 'RW 1 ZERO'; done; } > many.vmdk
expect_error 'more than 8192 extents' "$DISKIMG" convert -O raw many.vmdk o2.raw
# 8000 extents on one file: one descriptor open, the file opened once
{ echo '# Disk DescriptorFile'; for i in $(seq 0 7999); do echo "RW 1 FLAT \"b.bin\" $((i % 4096))"; done; } > lots.vmdk
rm -f o2.raw
ok "$DISKIMG" convert -O raw lots.vmdk o2.raw
{ head -c 2097152 b.bin; head -c $((3904 * 512)) b.bin; } | cmp - o2.raw || fail "8000 extents: wrong content"
rm -f o2.raw

# 8000 extents naming one sparse file whose grain directory is 64 KiB: the
# directories together are bounded (not 500 MiB of tables)
python3 -c '
import struct
h = struct.pack("<4sIIQQQQIQQQB4sH", b"KDMV", 1, 3, 1 << 30, 128, 0, 0, 512, 0, 1, 129, 0,
                b"\n \r\n", 0)
open("gd64k.vmdk", "wb").write(h + bytes(512 - len(h)) + bytes(16384 * 4))' || fail "python"
{ echo '# Disk DescriptorFile'; for i in $(seq 1 8000); do echo 'RW 1 SPARSE "gd64k.vmdk"'; done; } > tables.vmdk
expect_error 'gd64k.vmdk: grain directories of the extents need more than the 256 MiB budget' \
    "$DISKIMG" convert -O raw tables.vmdk o2.raw
{ echo '# Disk DescriptorFile'; for i in $(seq 1 100); do echo 'RW 1 SPARSE "gd64k.vmdk"'; done; } > tables2.vmdk
ok "$DISKIMG" convert -O raw tables2.vmdk o2.raw
cmp o2.raw <(head -c 51200 /dev/zero) || fail "100 sparse extents: wrong content"
rm -f o2.raw

# a bad line is quoted with its control bytes escaped: a descriptor cannot
# send escape sequences to the terminal through the message
printf '# Disk DescriptorFile\nRW 10 FLAT "b.bin" \033]0;title\007\033[31m\n' > esc.vmdk
expect_error "esc.vmdk: descriptor line 2: extent offset is not a number of sectors: 'RW 10 FLAT \"b.bin\" \\\\x1b\]0;title\\\\x07\\\\x1b\[31m'" \
    "$DISKIMG" convert -f vmdk -O raw esc.vmdk o2.raw
LC_ALL=C grep -q "$(printf '\033')" "$T/stderr" && fail "an escape byte reached the message"

# a descriptor over 1 MiB
{ echo '# Disk DescriptorFile'; echo 'RW 1 ZERO'; head -c 1100000 /dev/zero | tr '\0' '#' ; echo; } > big.vmdk
expect_error 'too large' "$DISKIMG" convert -O raw big.vmdk o2.raw

# unsupported extent kinds
printf '# Disk DescriptorFile\nRW 2048 SESPARSE "a.bin"\n' > se.vmdk
expect_error 'seSparse extents .* not supported' "$DISKIMG" convert -O raw se.vmdk o2.raw
printf '# Disk DescriptorFile\nRW 2048 VMFSRDM "a.bin"\n' > rdm.vmdk
expect_error 'raw device maps.* not supported' "$DISKIMG" convert -O raw rdm.vmdk o2.raw

# a damaged header under a .vmdk name is never read as raw
cp s.vmdk dmg.vmdk && printf 'XDMV' | dd of=dmg.vmdk conv=notrunc status=none
expect_error 'dmg.vmdk: .*no known format signature.*-f raw' "$DISKIMG" convert -O raw dmg.vmdk o2.raw
[ ! -e o2.raw ] || fail "an output was left after a failure"
exit 0
