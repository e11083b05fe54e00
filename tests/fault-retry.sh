#!/bin/bash
# EINTR and short transfers are not errors: with every read, write and fsync
# interrupted (each first attempt: its retry gets through) or cut short, each
# conversion still succeeds with identical content, raw/qcow2/vmdk in and
# raw/qcow2 out; so does a single interruption at every Nth read.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault/lib.sh"
mkdir -p "$T/in" "$T/o"
gen -s 12 -m 16K -M 512K 3M "$T/in/src.raw"
qemu-img convert -f raw -O qcow2 "$T/in/src.raw" "$T/in/src.qcow2"
qemu-img convert -f raw -O qcow2 -c -o cluster_size=16K,compression_type=zstd "$T/in/src.raw" "$T/in/srcz.qcow2"
qemu-img convert -f raw -O vmdk -o subformat=streamOptimized "$T/in/src.raw" "$T/in/src.vmdk"
srcs="src.raw src.qcow2 srcz.qcow2"
ok "$DISKIMG" info "$T/in/src.vmdk" >/dev/null
srcs="$srcs src.vmdk"
checksum_inputs

for src in $srcs; do
    for fmt in raw qcow2; do
        for f in read:1+:EINTR,write:1+:EINTR,sync:1+:EINTR read:1+:short,write:1+:short \
                 read:1+:short,write:1+:EINTR,sync:1+:EINTR,punch:1+:short; do
            out=$T/o/out.$fmt
            DISKIMG_FAULT=$f timeout -s KILL 60 "$DISKIMG" convert -O $fmt "$T/in/$src" "$out" 2>"$T/err" ||
                { cat "$T/err" >&2; fail "$src -> $fmt under $f failed"; }
            [ -s "$T/err" ] && { cat "$T/err" >&2; fail "$src -> $fmt under $f: a message"; }
            same_content "$T/in/$src" "$out"
            [ $fmt = qcow2 ] && { qemu-img check -q "$out" || fail "$src -> qcow2 under $f: check"; }
            rm -f "$out"
            empty_dir "$T/o" "$src -> $fmt $f"
        done
    done
    # one interruption at each read, in turn (every one in the ASan build,
    # every third in the plain one: sweep_case), each output the same
    # bytes as qemu-img's reading of the source
    fault_counts "$T/in/$src" raw
    qemu-img convert -O raw "$T/in/$src" "$T/ref.raw"
    for ((n = 1; n <= R; n++)); do
        sweep_case $n $R || continue
        DISKIMG_FAULT=read:$n:EINTR,write:$n:EINTR "$DISKIMG" convert -O raw "$T/in/$src" "$T/o/out.raw" ||
            fail "$src: EINTR at read/write $n"
        cmp -s "$T/ref.raw" "$T/o/out.raw" || fail "$src: EINTR at read/write $n: content differs"
        rm -f "$T/o/out.raw"
    done
    rm -f "$T/ref.raw"
    echo "$src: ok"
done
unchanged retry
exit 0
