#!/bin/bash
# OVA appliances (tar archives: ustar, GNU long names, pax) are read in
# place: the first disk by default, --disk N for the others, from the file
# and from a pipe; `info` lists the disks.  Archives without disks, a disk
# index out of range and a damaged tar header are refused.
. "$(dirname "$0")/lib.sh"
need qemu-img
need tar
cd "$T" || fail "cd"

gen -s 61 -m 4K -M 256K 3M one.raw
gen -s 62 -m 4K -M 256K 2M two.raw
qemu-img convert -q -f raw -O vmdk -o subformat=streamOptimized one.raw disk1.vmdk || fail "qemu-img"
qemu-img convert -q -f raw -O vmdk -o subformat=streamOptimized two.raw disk2.vmdk || fail "qemu-img"
cat > appliance.ovf <<'X'
<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1">
  <References>
    <File ovf:href="disk1.vmdk" ovf:id="file1"/>
    <File ovf:href="disk2.vmdk" ovf:id="file2"/>
  </References>
</Envelope>
X
sha1sum appliance.ovf disk1.vmdk disk2.vmdk > appliance.mf
tar --format=ustar -cf app.ova appliance.ovf appliance.mf disk1.vmdk disk2.vmdk || fail "tar"

disk() {  # WANT ARGS...: convert ARGS to out.raw, compare with WANT
    local want=$1; shift
    rm -f out.raw
    ok "$DISKIMG" convert "$@" out.raw
    cmp "$want" out.raw || fail "convert $*: wrong disk"
}
piped() {  # WANT OVA ARGS...: the same through a pipe
    local want=$1 ova=$2; shift 2
    rm -f out.raw
    "$DISKIMG" convert "$@" - out.raw < <(cat "$ova") 2>err || { cat err; fail "pipe $ova $*"; }
    cmp "$want" out.raw || fail "pipe $ova $*: wrong disk"
}

disk one.raw -O raw app.ova
disk one.raw -f ova -O raw app.ova
disk two.raw --disk 1 -O raw app.ova
piped one.raw app.ova -O raw
piped two.raw app.ova --disk 1 -O raw
expect_error 'holds 2 disks; disk 2 does not exist' "$DISKIMG" convert --disk 2 -O raw app.ova o.raw

"$DISKIMG" info --output=json app.ova > info.json || fail "info"
grep -q '"type": "ova"' info.json || fail "info: no ova details"
grep -q '"name": "disk1.vmdk"' info.json || fail "info: disk1 not listed"
grep -q '"name": "disk2.vmdk"' info.json || fail "info: disk2 not listed"
grep -q '"virtual-size": 3145728' info.json || fail "info: size of the first disk"
"$DISKIMG" info --disk 1 --output=json app.ova > info.json || fail "info --disk 1"
grep -q '"virtual-size": 2097152' info.json || fail "info --disk 1: size of the second disk"

# GNU and pax archives with names longer than 100 bytes
long=$(printf 'd%.0s' $(seq 1 120)).vmdk
cp disk2.vmdk "$long"
for fmt in gnu pax; do
    tar --format=$fmt -cf long-$fmt.ova appliance.ovf "$long" disk1.vmdk || fail "tar $fmt"
    disk two.raw -O raw long-$fmt.ova
    disk one.raw --disk 1 -O raw long-$fmt.ova
    piped one.raw long-$fmt.ova --disk 1 -O raw
    "$DISKIMG" info --output=json long-$fmt.ova > info.json || fail "info $fmt"
    grep -q "\"name\": \"$long\"" info.json || fail "$fmt: long name not listed"
done

# refusals
tar --format=ustar -cf nodisk.ova appliance.ovf appliance.mf || fail "tar"
expect_error 'nodisk.ova: the OVA archive holds no .vmdk disk' "$DISKIMG" convert -O raw nodisk.ova o.raw
cp app.ova bad.ova && printf 'X' | dd of=bad.ova bs=1 seek=10 conv=notrunc status=none
expect_error 'bad.ova: .*no known format signature.*-f raw' "$DISKIMG" convert -O raw bad.ova o.raw
expect_error 'bad.ova: tar header checksum is wrong' "$DISKIMG" convert -f ova -O raw bad.ova o.raw
head -c 700000 app.ova > cut.ova
expect_error "cut.ova: .*runs past the end" "$DISKIMG" convert -O raw cut.ova o.raw
[ ! -e o.raw ] || fail "an output was left after a failure"
exit 0
