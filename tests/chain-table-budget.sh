#!/bin/bash
# One memory budget for the tables of a whole backing chain (256 MiB),
# whatever format each layer is:
#   - 63 small descriptors naming each other as parents, each listing a
#     sparse extent with a 16 MiB grain directory four times (each image
#     within its own limits; 4 GiB together) fail at once, under 1 GiB of
#     address space, naming the budget;
#   - qcow2 layers with 32 MiB L1 tables (512-byte clusters, 128 GiB)
#     count against the same budget, also under a VMDK descriptor;
#   - deep chains of ordinary images (10 qcow2 layers, 10 VMDK layers) read
#     right.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
need fallocate
cd "$T" || fail "cd"

# limited CMD...: CMD under 1 GiB of address space (not in the ASan build,
# whose shadow memory alone is larger) and 60 s
limited() {
    if asan_build; then
        timeout -s KILL 60 "$@"
    else
        ( ulimit -v $((1024 * 1024)); exec timeout -s KILL 60 "$@" )
    fi
}

# a hosted sparse extent of 4M sectors with one-sector grains and one entry
# per grain table: a 16 MiB grain directory (a hole in the file), no tables
python3 - <<'PY' || fail "sparse extent"
import struct
h = struct.pack("<4sIIQQQQIQQQB4sH", b"KDMV", 1, 3, 4 << 20, 1, 0, 0, 1, 0, 1,
                1 + (16 << 20) // 512, 0, b"\n \r\n", 0)
with open("sparse.vmdk", "wb") as f:
    f.write(h + bytes(512 - len(h)))
    f.truncate(512 + (16 << 20))
PY
for i in $(seq 0 62); do
    {
        echo '# Disk DescriptorFile'
        echo 'version=1'
        echo 'createType="monolithicSparse"'
        [ "$i" -lt 62 ] && echo "parentFileNameHint=\"d$((i + 1)).vmdk\""
        for k in 1 2 3 4; do echo "RW 1048576 SPARSE \"sparse.vmdk\""; done
    } > d$i.vmdk
done
[ "$(du -sk . | cut -f1)" -lt 1024 ] || fail "the folder is not small"
for cmd in map "convert -O raw"; do
    rm -f out.raw
    # shellcheck disable=SC2086
    limited "$DISKIMG" $cmd d0.vmdk $([ "$cmd" = map ] || echo out.raw) >out 2>err && fail "$cmd: exit 0"
    grep -q 'sparse.vmdk: grain directories of the extents need more than the 256 MiB budget for the tables of one image chain' err ||
        { cat err >&2; fail "$cmd: not refused for the chain's budget"; }
    [ -e out.raw ] && fail "$cmd: output left"
done
# one image alone is fine (64 MiB of directories), and so are three of the chain
ok "$DISKIMG" info d62.vmdk
ok limited "$DISKIMG" map d60.vmdk

# qcow2 L1 tables: 7 layers of 32 MiB fit, 9 do not.  Each layer: 128 GiB
# with 512-byte clusters, its zero L1 table a hole (qemu-img takes 15 s to
# write one such image; this is what it would write, less the refcounts,
# which reading does not use)
cat > mkq.py <<'PY'
import struct, sys
name, backing = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
cs, l1_off = 512, 1024
hdr = struct.pack(">4sIQIIQIIQQIIQ", b"QFI\xfb", 2, 72 if backing else 0, len(backing), 9,
                  128 << 30, 0, 4 << 20, l1_off, cs, 1, 0, 0)
with open(name, "wb") as f:
    f.write(hdr + backing.encode())
    f.truncate(l1_off + (32 << 20))
PY
python3 mkq.py q1.qcow2 || fail "mkq.py"
for i in $(seq 2 9); do python3 mkq.py q$i.qcow2 q$((i - 1)).qcow2 || fail "mkq.py"; done
qemu-img map q9.qcow2 >/dev/null || fail "qemu-img cannot read the layers"
ok limited "$DISKIMG" map q7.qcow2
expect_error 'q1.qcow2: L1 tables and other tables need more than the 256 MiB budget' \
    limited "$DISKIMG" map q9.qcow2
# a descriptor over qcow2 layers: one chain, one budget (64 + 7 * 32 MiB)
{
    echo '# Disk DescriptorFile'
    echo 'parentFileNameHint="q7.qcow2"'
    for k in 1 2 3 4; do echo "RW 1048576 SPARSE \"sparse.vmdk\""; done
} > over7.vmdk
expect_error 'need more than the 256 MiB budget' limited "$DISKIMG" map over7.vmdk
rm -f q*.qcow2

# ordinary deep chains read right
gen -s 77 -m 4K -M 64K 4M base.raw
qemu-img convert -f raw -O qcow2 base.raw c0.qcow2 || fail "qemu-img convert"
qemu-img convert -f raw -O vmdk base.raw v0.vmdk || fail "qemu-img convert"
for i in $(seq 1 10); do
    qemu-img create -q -f qcow2 -b c$((i - 1)).qcow2 -F qcow2 c$i.qcow2 || fail "create"
    qemu-io -c "write -P $((0x60 + i)) $((i * 300))k 5k" c$i.qcow2 >/dev/null
    qemu-img create -q -f vmdk -b v$((i - 1)).vmdk -F vmdk v$i.vmdk || fail "create"
    qemu-io -c "write -P $((0x60 + i)) $((i * 300))k 5k" v$i.vmdk >/dev/null
done
for top in c10.qcow2 v10.vmdk; do
    rm -f out.raw
    ok limited "$DISKIMG" convert -O raw $top out.raw
    qemu-img compare -q -F raw $top out.raw || fail "$top: 10 layers read wrong"
done
exit 0
