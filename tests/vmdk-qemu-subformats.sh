#!/bin/bash
# Every VMDK variant qemu-img writes (subformats, compat6, zeroed grains,
# adapter types, hardware versions, a size that is not a multiple of the
# grain) converts to exactly what qemu-img reads from it, sequentially and
# with two threads reading at once; `info` gives qemu-img's format details.
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3

# 6 MiB + 4.5 KiB: the last grain is partial; runs of data, text, zeros, holes
gen -s 7 -m 4K -M 512K -u 6295552 "$T/src.raw"

same_info() {   # IMG: cluster-size and format-specific as qemu-img says
    qemu-img info --output=json "$1" > "$T/q.json" || fail "qemu-img info $1"
    "$DISKIMG" info --output=json "$1" > "$T/d.json" || fail "diskimg info $1"
    python3 - "$T/q.json" "$T/d.json" <<'PY' || fail "info of $1 differs from qemu-img's"
import json, sys
q, d = (json.load(open(f)) for f in sys.argv[1:3])
for k in ("virtual-size", "cluster-size", "format-specific", "dirty-flag", "actual-size"):
    if q.get(k) != d.get(k):
        sys.exit("%s: qemu-img %r, diskimg %r" % (k, q.get(k), d.get(k)))
PY
}

check() {   # NAME: compare our reading of $T/NAME.vmdk with qemu-img's
    local n=$1
    qemu-img convert -f vmdk -O raw "$T/$n.vmdk" "$T/$n.q.raw" || fail "qemu-img reads $n"
    ok "$DISKIMG" convert -O raw "$T/$n.vmdk" "$T/$n.raw"
    cmp "$T/$n.q.raw" "$T/$n.raw" || fail "$n: content differs from qemu-img's reading"
    ok "$BUILD/tools/vmdkcat" -t 2 "$T/$n.vmdk" "$T/$n.t2.raw"
    cmp "$T/$n.q.raw" "$T/$n.t2.raw" || fail "$n: content differs when read by two threads"
    (cd "$T" && same_info "$n.vmdk")
    rm -f "$T/$n".*raw
}

i=0
for opts in subformat=monolithicSparse \
            subformat=monolithicSparse,compat6=on \
            subformat=monolithicSparse,zeroed_grain=on,adapter_type=lsilogic \
            subformat=monolithicSparse,hwversion=14,adapter_type=ide \
            subformat=monolithicFlat,adapter_type=buslogic \
            subformat=twoGbMaxExtentSparse \
            subformat=twoGbMaxExtentFlat,adapter_type=legacyESX \
            subformat=streamOptimized \
            subformat=streamOptimized,adapter_type=lsilogic,hwversion=6; do
    i=$((i + 1))
    qemu-img convert -f raw -O vmdk -o "$opts" "$T/src.raw" "$T/v$i.vmdk" ||
        fail "qemu-img convert -o $opts"
    check "v$i"
done

# to qcow2 as well (streamOptimized and hosted sparse)
for n in v1 v8; do
    ok "$DISKIMG" convert -O qcow2 "$T/$n.vmdk" "$T/$n.qcow2"
    qcompare "$T/$n.vmdk" "$T/$n.qcow2"
    rm -f "$T/$n.qcow2"
done

# zeroed grains (GTE 1) over a parent-less image and over data
qemu-img convert -f raw -O vmdk -o zeroed_grain=on "$T/src.raw" "$T/z.vmdk"
qemu-io -f vmdk -c "write -z 64k 192k" -c "write -z 1M 1M" "$T/z.vmdk" >/dev/null ||
    fail "qemu-io write -z"
check z
"$BUILD/tools/vmdkcat" -m "$T/z.vmdk" > "$T/map"
grep -q "^65536 196608 zero allocated" "$T/map" || { cat "$T/map"; fail "zeroed grains not reported as zero"; }

# several extents: data across the 2 GiB extent boundaries, sparse and flat
for sub in twoGbMaxExtentSparse twoGbMaxExtentFlat; do
    qemu-img create -q -f vmdk -o subformat=$sub "$T/m.vmdk" 4100M || fail "create $sub"
    qemu-img convert -n -f raw -O vmdk "$T/src.raw" "$T/m.vmdk" || fail "fill $sub"
    qemu-io -f vmdk -c "write -P 0x5a 2047M 2M" -c "write -P 0xa5 4095M 5M" "$T/m.vmdk" \
        >/dev/null || fail "qemu-io $sub"
    ok "$DISKIMG" convert -O raw "$T/m.vmdk" "$T/m.raw"
    qcompare "$T/m.vmdk" "$T/m.raw"
    (cd "$T" && same_info m.vmdk)
    rm -f "$T"/m*.vmdk "$T/m.raw"
done
exit 0
