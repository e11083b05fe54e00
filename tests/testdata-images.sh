#!/bin/bash
# The small committed images in testdata/images (one per format and
# subformat, made with qemu-img/qemu-io as testdata/README.md says): each
# reads with `convert -O raw` to the guest content recorded in
# testdata/guest-sha256.txt and to what qemu-img convert gives now, and
# `info --output=json` reports the virtual size qemu-img info reports (and
# the one recorded).  The OVA's disk is checked against qemu-img reading
# the member itself (qemu-img does not read OVA).  The images are read in
# place and must be unchanged afterwards.
. "$(dirname "$0")/lib.sh"
need qemu-img
need tar
D=$TOP/testdata/images
SUMS=$TOP/testdata/guest-sha256.txt
# committed files: missing ones are a failure, not a skip
[ -f "$SUMS" ] || fail "$SUMS is missing"
[ -d "$D" ] || fail "$D is missing"
before=$(cd "$D" && sha256sum -- *)

vsize() {  # top-level "virtual-size" of `info --output=json` (4-space indent)
    sed -n 's/^    "virtual-size": \([0-9]*\),*$/\1/p' | head -n 1
}

n=0
while read -r sum size img; do
    case $sum in ''|'#'*) continue ;; esac
    [ -f "$D/$img" ] || fail "$img: listed in $SUMS but not in $D"
    src=$D/$img
    if [ "${img##*.}" = ova ]; then
        # qemu-img's view of the archive's first disk: the member, extracted
        member=$(tar -tf "$src" | grep '\.vmdk$' | head -n 1)
        [ -n "$member" ] || fail "$img: no vmdk member"
        tar -xOf "$src" "$member" > "$T/member.vmdk" || fail "$img: tar -x $member"
        src=$T/member.vmdk
    fi
    rm -f "$T/d.raw" "$T/q.raw"
    qemu-img convert -O raw "$src" "$T/q.raw" || fail "$img: qemu-img convert"
    ok "$DISKIMG" convert -O raw "$D/$img" "$T/d.raw"
    got=$(sha256sum < "$T/d.raw" | cut -d' ' -f1)
    qsum=$(sha256sum < "$T/q.raw" | cut -d' ' -f1)
    [ "$qsum" = "$sum" ] || fail "$img: qemu-img's guest content $qsum, recorded $sum"
    [ "$got" = "$sum" ] || fail "$img: guest content $got, recorded $sum"
    cmp "$T/q.raw" "$T/d.raw" || fail "$img: differs from qemu-img convert -O raw"

    ok "$DISKIMG" info --output=json "$D/$img" > "$T/d.json"
    qemu-img info --output=json "$src" > "$T/q.json" || fail "$img: qemu-img info"
    dv=$(vsize < "$T/d.json")
    qv=$(vsize < "$T/q.json")
    [ -n "$dv" ] || { cat "$T/d.json" >&2; fail "$img: no virtual-size in info --output=json"; }
    [ "$dv" = "$qv" ] || fail "$img: virtual-size $dv, qemu-img says $qv"
    [ "$dv" = "$size" ] || fail "$img: virtual-size $dv, recorded $size"
    echo "$img: $size bytes, $sum"
    n=$((n + 1))
done < "$SUMS"
[ $n -ge 11 ] || fail "only $n images listed in $SUMS"

after=$(cd "$D" && sha256sum -- *)
[ "$before" = "$after" ] || fail "reading changed the files in $D"
exit 0
