#!/bin/bash
# make-matrix.sh DIR: the images of tests/qcow2/matrix.py, made by qemu-img
# and qemu-io, in DIR/N/ (N.qcow2, its data or backing file, N.conf: the
# features).  Each image gets the same writes: unaligned ones across
# clusters, zeros, a discard, a tail; compressed clusters where asked; a
# snapshot between two rounds of writes; bitmaps before the writes.
set -eu
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
size=$((3 * 1024 * 1024 + 7 * 512))     # odd: the last cluster is partial
n=0
qio() { qemu-io "$@" >/dev/null; }
python3 "$here/matrix.py" | grep -v '^#' | while read -r line; do
    n=$((n + 1))
    d=$dir/$n
    mkdir -p "$d"
    echo "$line" >"$d/$n.conf"
    declare -A f=()
    for w in $line; do f[${w%%=*}]=${w#*=}; done
    cs=${f[cs]}
    o="compat=${f[compat]},cluster_size=$cs,refcount_bits=${f[refbits]}"
    o="$o,preallocation=${f[prealloc]}"
    [ "${f[compat]}" = 1.1 ] && o="$o,lazy_refcounts=${f[lazy]},extended_l2=${f[extl2]}"
    [ "${f[comp]}" = zstd ] && o="$o,compression_type=zstd"
    case ${f[data]} in
    file) o="$o,data_file=$n.data" ;;
    raw) o="$o,data_file=$n.data,data_file_raw=on" ;;
    esac
    (
        cd "$d"
        if [ "${f[backing]}" = yes ]; then
            qemu-img create -q -f qcow2 base.qcow2 $size
            qio -c 'write -P 0x11 0 1M' -c 'write -P 0x12 2M 700k' base.qcow2
            o="$o,backing_file=base.qcow2,backing_fmt=qcow2"
        fi
        qemu-img create -q -f qcow2 -o "$o" $n.qcow2 $size
        if [ "${f[bitmap]}" = yes ]; then
            qemu-img bitmap --add $n.qcow2 b1
            qemu-img bitmap --add -g 1M --disable $n.qcow2 b2
        fi
        # compressed clusters first (they need clusters never written)
        if [ "${f[comp]}" != none ]; then
            c=$(( 2621440 / cs * cs )); len=$(( cs * 2 ))
            [ $((c + len)) -gt $size ] && len=$((size - c))
            qio -c "write -c -P 0xf6 $c $len" $n.qcow2
        fi
        qio -c 'write -P 0xa1 1000 3000' -c 'write -P 0xb2 65000 70000' \
            -c 'write -z 512k 128k' -c 'write -P 0xc3 1536k 4k' \
            -c 'write -P 0xe5 1M 128k' -c 'discard 1M 64k' $n.qcow2
        if [ "${f[snap]}" = yes ]; then
            qemu-img snapshot -c s1 $n.qcow2
            qio -c 'write -P 0x5a 0 64k' -c 'write -z 1536k 2k' -c 'write -P 0x5b 2000 100' $n.qcow2
        fi
        # the tail, unless that would rewrite the compressed cluster
        if [ "${f[comp]}" = none ] || [ "$cs" -lt 2097152 ]; then
            qio -c "write -P 0xd4 $((size - 1000)) 1000" $n.qcow2
        fi
    )
done
