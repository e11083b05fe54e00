#!/bin/bash
# copy offload falls back, range by range, to reading and writing: across
# file systems (EXDEV; per source file: a backing file elsewhere does not
# stop the top image's data being shared), on ext4 (no reflink:
# copy_file_range copies in the kernel), for vmdk grains that are not
# block-aligned, and never with
# --copy-offload=off or -c; --copy-offload=required (-C) fails when no data
# could be offloaded and leaves no output.  Every output is identical.
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T" || exit 1

# conv NAME OUT ARGS...: convert -v, the output must equal src.raw
conv() {
    local name=$1 out=$2; shift 2
    rm -f "$out"
    "$DISKIMG" convert -v "$@" "$out" 2>"$T/$name.err" || { cat "$T/$name.err" >&2; fail "$name: convert"; }
    qemu-img compare -q "$src" "$out" || fail "$name: output differs"
}
counts() { echo "$(offload_bytes 1 "$T/$1.err") $(offload_bytes 2 "$T/$1.err") $(offload_bytes 3 "$T/$1.err")"; }

loop_fs xfs "$T/x"
loop_fs ext4 "$T/e"
src=$T/x/src.raw
gen -s 11 -a 80 -M 1M 8M "$src"
qemu-img convert -q -f raw -O qcow2 "$src" "$T/x/src.qcow2"

# different file systems: nothing shared or offloaded, all copied
conv exdev "$T/e/o.raw" -f raw -O raw "$src"
read -r s o c <<<"$(counts exdev)"
[ "$s" = 0 ] && [ "$o" = 0 ] && [ "$c" -gt 0 ] || { cat "$T/exdev.err" >&2; fail "exdev: $s $o $c"; }
grep -q 'refused' "$T/exdev.err" || { cat "$T/exdev.err" >&2; fail "exdev: -v does not say offload was refused"; }
conv exdev-qcow2 "$T/e/o.qcow2" -O qcow2 "$T/x/src.qcow2"
qemu-img check -q "$T/e/o.qcow2" || fail "exdev-qcow2: qemu-img check"

# a chain across file systems: EXDEV from the backing file (on ext4) must
# not stop the top image's clusters (on XFS, like the output) being shared
qemu-img create -q -f qcow2 "$T/e/base.qcow2" 8M
qemu-io -c 'write -P 0x11 0 4M' "$T/e/base.qcow2" >/dev/null || fail "qemu-io base"
qemu-img create -q -f qcow2 -b "$T/e/base.qcow2" -F qcow2 "$T/x/top.qcow2"
qemu-io -c 'write -P 0x22 4M 4M' "$T/x/top.qcow2" >/dev/null || fail "qemu-io top"
rm -f "$T/x/chain.raw"
"$DISKIMG" convert -v --allow-external -O raw "$T/x/top.qcow2" "$T/x/chain.raw" 2>"$T/chain.err" ||
    { cat "$T/chain.err" >&2; fail "chain: convert"; }
qemu-img compare -q "$T/x/top.qcow2" "$T/x/chain.raw" || fail "chain: output differs"
read -r s o c <<<"$(counts chain)"
[ "$s" -ge $((4 << 20)) ] && [ "$c" -ge $((4 << 20)) ] ||
    { cat "$T/chain.err" >&2; fail "chain: shared $s, copied $c (want the top's 4 MiB shared, the base's copied)"; }
rm -f "$T/x/chain.raw" "$T/x/top.qcow2" "$T/e/base.qcow2"

# ext4: no reflink; copy_file_range copies in the kernel (auto and -C)
cp "$src" "$T/e/src.raw"
conv ext4auto "$T/e/o2.raw" -f raw -O raw "$T/e/src.raw"
read -r s o c <<<"$(counts ext4auto)"
[ "$s" = 0 ] && [ "$o" -gt 0 ] && [ "$c" = 0 ] || { cat "$T/ext4auto.err" >&2; fail "ext4 auto: $s $o $c"; }
conv ext4 "$T/e/o2.raw" -C -f raw -O raw "$T/e/src.raw"
read -r s o c <<<"$(counts ext4)"
[ "$s" = 0 ] && [ "$o" -gt 0 ] && [ "$c" = 0 ] || { cat "$T/ext4.err" >&2; fail "ext4 -C: $s $o $c"; }
off_alloc=$(alloc "$T/e/o2.raw")
"$DISKIMG" convert --copy-offload=off -f raw -O raw "$T/e/src.raw" "$T/e/o3.raw" || fail "ext4 off"
[ "$off_alloc" -le $(( $(alloc "$T/e/o3.raw") * 21 / 20 )) ] || fail "ext4: less sparse with offload"
rm -f "$T/e/o2.raw" "$T/e/o3.raw" "$T/e/o.raw" "$T/e/o.qcow2" "$T/e/src.raw"

# --copy-offload=off: everything copied
conv off "$T/x/off.raw" --copy-offload=off -f raw -O raw "$src"
read -r s o c <<<"$(counts off)"
[ "$s" = 0 ] && [ "$o" = 0 ] && [ "$c" -gt 0 ] || fail "off: $s $o $c"

# -c: never offloaded; with required (-C) it is refused up front with
# qemu-img's words (even for a source without data), leaving nothing
conv compressed "$T/x/c.qcow2" -c -O qcow2 "$src"
read -r s o c <<<"$(counts compressed)"
[ "$s" = 0 ] && [ "$o" = 0 ] || fail "-c: $s $o"
expect_error 'Cannot enable copy offloading when -c is used' "$DISKIMG" convert -C -c -O qcow2 "$src" "$T/x/cc.qcow2"
[ ! -e "$T/x/cc.qcow2" ] || fail "-C -c left an output"
truncate -s 4M "$T/x/empty0.raw"
expect_error 'Cannot enable copy offloading when -c is used' "$DISKIMG" convert -C -c -O qcow2 "$T/x/empty0.raw" "$T/x/cc2.qcow2"
[ ! -e "$T/x/cc2.qcow2" ] || fail "-C -c of an empty source left an output"
expect_error 'copy offload is required' "$DISKIMG" convert --copy-offload=required -f raw "$src" "$T/e/req.raw"
[ -z "$(ls -A "$T/e" | grep -v lost+found)" ] || { ls -la "$T/e" >&2; fail "required across file systems left a file"; }
# a source of nothing but holes needs no offload: required succeeds
truncate -s 4M "$T/x/empty.raw"
ok "$DISKIMG" convert -C -f raw "$T/x/empty.raw" "$T/x/empty-out.raw"

# vmdk sparse grains (qemu-img places them on 64 KiB): shared
qemu-img convert -q -f raw -O vmdk "$src" "$T/x/s.vmdk"
conv vmdk "$T/x/v.raw" -O raw "$T/x/s.vmdk"
read -r s o c <<<"$(counts vmdk)"
[ "$s" -gt 0 ] && [ "$c" = 0 ] || { cat "$T/vmdk.err" >&2; fail "vmdk sparse: $s $o $c"; }
# a vmdk flat extent that starts one sector into its file: no block of it
# lies where the output's block does, so everything is read and written
qemu-img convert -q -f raw -O vmdk -o subformat=monolithicFlat "$src" "$T/x/f.vmdk"
{ head -c 512 /dev/zero; cat "$T/x/f-flat.vmdk"; } > "$T/x/g-flat.vmdk"
sed 's/"f-flat.vmdk" 0$/"g-flat.vmdk" 1/' "$T/x/f.vmdk" > "$T/x/g.vmdk"
grep -q '"g-flat.vmdk" 1' "$T/x/g.vmdk" || fail "cannot make the shifted flat vmdk"
conv vmdk-unaligned "$T/x/g.raw" -O raw "$T/x/g.vmdk"
read -r s o c <<<"$(counts vmdk-unaligned)"
[ "$s" = 0 ] && [ "$o" = 0 ] && [ "$c" -gt 0 ] || { cat "$T/vmdk-unaligned.err" >&2; fail "vmdk unaligned: $s $o $c"; }
# stream source (a pipe): never offloaded
rm -f "$T/x/p.raw"
cat "$src" | "$DISKIMG" convert -v -f raw -O raw - "$T/x/p.raw" 2>"$T/pipe.err" || { cat "$T/pipe.err"; fail pipe; }
cmp "$src" "$T/x/p.raw" || fail "pipe: differs"
grep -q 'not used: a source is a stream' "$T/pipe.err" || { cat "$T/pipe.err" >&2; fail "pipe: -v"; }
exit 0
