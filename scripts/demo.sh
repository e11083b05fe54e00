#!/bin/bash
# make demo: generate the seeded demo disk (no large binaries in git) and
# show what diskimg does to it: allocated size before and after, time taken,
# and a round trip through vmdk and qcow2 back to raw, checked with cmp.
set -eu
cd "$(dirname "$0")/.."
D=./diskimg
GEN=build/tools/genimg
img=testdata/demo.raw
out=testdata/demo-out
mkdir -p "$out"
rm -f "$out"/*

alloc() { echo $(( $(stat -c %b "$1") * 512 )); }
human() { numfmt --to=iec-i --suffix=B "$1" 2>/dev/null || echo "$1 bytes"; }
timed() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); awk "BEGIN{printf \"%.2f s\", $e - $s}"; }

if [ ! -f "$img" ]; then
    echo "== generating $img (seeded: 1 GiB, mixed data, written zeros and holes)"
    "$GEN" -s 2024 -a 70 1G "$img"
fi
echo "== the demo disk"
$D info "$img"
echo "   allocated: $(human "$(alloc "$img")")"
echo

echo "== convert raw -> raw: written zeros become holes"
t=$(timed $D convert -t unsafe "$img" "$out/copy.raw")
echo "   $img: $(human "$(alloc "$img")") allocated -> $out/copy.raw: $(human "$(alloc "$out/copy.raw")") in $t"
cmp "$img" "$out/copy.raw" && echo "   content identical (cmp)"
echo

echo "== sparsify in place: a fully allocated copy gets its zero blocks back"
cp --sparse=never "$img" "$out/dense.raw"
before=$(alloc "$out/dense.raw")
t=$(timed $D sparsify -q "$out/dense.raw")
echo "   $out/dense.raw: $(human "$before") -> $(human "$(alloc "$out/dense.raw")") in $t"
cmp "$img" "$out/dense.raw" && echo "   content unchanged (cmp)"
echo
echo "== round trip: raw -> vmdk (streamOptimized) -> qcow2 -> vmdk (monolithicSparse) -> raw"
prev=$img
for step in "vmdk -o subformat=streamOptimized:trip1.vmdk" "qcow2:trip2.qcow2" \
            "vmdk:trip3.vmdk" "raw:trip4.raw"; do
    fmt=${step%%:*} dst=$out/${step#*:}
    # shellcheck disable=SC2086
    t=$(timed $D convert -t unsafe -O $fmt "$prev" "$dst")
    kind=$($D info "$dst" | sed -n 's/^file format: //p; s/^ *create type: //p' | tr '\n' ' ')
    printf '   %-12s -> %-36s %9s allocated, %s\n' "$(basename "$prev")" \
        "$(basename "$dst") (${kind% })" "$(human "$(alloc "$dst")")" "$t"
    prev=$dst
done
cmp "$img" "$out/trip4.raw" && echo "   content identical after the round trip (cmp)"
echo

echo "demo done; outputs are in $out/ (make clean-demo removes them)"
