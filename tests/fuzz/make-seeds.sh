#!/bin/bash
# Seed corpora for the fuzz targets: small images of every variant, made by
# qemu-img/qemu-io from disks written by the project's seeded generator.
#   tests/fuzz/make-seeds.sh OUTDIR      -> OUTDIR/<target>/<name>
# Needs build/tools/genimg (make unit) and qemu-img/qemu-io.  Images are
# kept small (tiny clusters, 64-512 KiB disks): the fuzzer mutates faster.
set -eu
out=${1:?usage: make-seeds.sh OUTDIR}
top=$(cd "$(dirname "$0")/../.." && pwd)
genimg=${GENIMG:-$top/build/tools/genimg}
[ -x "$genimg" ] || { echo "make-seeds: $genimg missing (run make unit)" >&2; exit 1; }
command -v qemu-img >/dev/null || { echo "make-seeds: qemu-img missing" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

# a small disk: runs of random, text, zeros and holes
disk() { rm -f "$tmp/$1"; "$genimg" -s "$2" -m 512 -M 8K "${3:-64K}" "$tmp/$1" >/dev/null; }
disk d1 1
disk d2 2
disk d3 3 128K

# ---- qcow2 --------------------------------------------------------------
q=$out/fuzz_qcow2
mkdir -p "$q"
qc() {  # qc NAME [convert options...]: d1 converted to qcow2
    local name=$1; shift
    qemu-img convert -q -f raw -O qcow2 "$@" "$tmp/d1" "$q/$name.qcow2"
}
qc v3-c4k -o cluster_size=4096
qc v3-c512 -o cluster_size=512
qc v2-c4k -o compat=0.10,cluster_size=4096
qc v3-zlib -c -o cluster_size=4096
qc v3-zstd -c -o cluster_size=4096,compression_type=zstd
qc v2-zlib -c -o compat=0.10,cluster_size=4096
qc v3-zlib-c512 -c -o cluster_size=512
qc extl2 -o cluster_size=16384,extended_l2=on
qc extl2-zstd -c -o cluster_size=16384,extended_l2=on,compression_type=zstd
qc rc1 -o cluster_size=4096,refcount_bits=1
qc rc64 -o cluster_size=4096,refcount_bits=64
qc lazy -o cluster_size=4096,lazy_refcounts=on
qc prealloc -o cluster_size=4096,preallocation=metadata
qemu-img convert -q -f raw -O qcow2 -o cluster_size=65536 "$tmp/d3" "$q/c64k.qcow2"
# zero clusters, subcluster writes, a compressed cluster over data (qemu-io)
qemu-img create -q -f qcow2 -o cluster_size=4096 "$q/zero.qcow2" 128K
qemu-io -f qcow2 -c 'write -P 0x11 0 16K' -c 'write -z 8K 8K' -c 'write -c -P 0x22 32K 4K' \
    -c 'write -z -u 64K 4K' "$q/zero.qcow2" >/dev/null
qemu-img create -q -f qcow2 -o cluster_size=16384,extended_l2=on "$q/extl2-sub.qcow2" 128K
qemu-io -f qcow2 -c 'write -P 0x33 1K 3K' -c 'write -z 20K 2K' -c 'write -P 0x44 40K 1K' \
    "$q/extl2-sub.qcow2" >/dev/null
# odd virtual size (not a multiple of the cluster)
qemu-img create -q -f qcow2 -o cluster_size=4096 "$q/odd.qcow2" 100001
qemu-io -f qcow2 -c 'write -P 0x55 95K 2560' "$q/odd.qcow2" >/dev/null
# snapshots
qc snap -o cluster_size=4096
qemu-img snapshot -c one "$q/snap.qcow2"
qemu-io -f qcow2 -c 'write -P 0x66 0 8K' "$q/snap.qcow2" >/dev/null
qemu-img snapshot -c two "$q/snap.qcow2"
# backing file names and formats (refused by the fuzz target: no files)
qemu-img create -q -f raw "$tmp/base.raw" 64K
qemu-img create -q -f qcow2 -o cluster_size=4096 -b "$tmp/base.raw" -F raw "$q/backing.qcow2"
qemu-io -f qcow2 -c 'write -P 0x77 4K 4K' "$q/backing.qcow2" >/dev/null
qemu-img rebase -u -b base.raw -F raw "$q/backing.qcow2"
qemu-img create -q -f qcow2 -o compat=0.10,cluster_size=4096 -b "$tmp/base.raw" -F raw \
    "$q/backing-v2.qcow2"
qemu-img rebase -u -b ../base.raw -F raw "$q/backing-v2.qcow2"
# external data file
qemu-img create -q -f qcow2 -o cluster_size=4096,data_file="$tmp/data.raw" "$q/datafile.qcow2" 64K
# persistent dirty bitmap
qc bitmap -o cluster_size=4096
qemu-img bitmap -q --add "$q/bitmap.qcow2" b0 2>/dev/null || rm -f "$q/bitmap.qcow2"
# dirty bit set (lazy refcounts, killed mid-way would do the same)
cp "$q/lazy.qcow2" "$q/dirty.qcow2"
printf '\x01' | dd of="$q/dirty.qcow2" bs=1 seek=79 conv=notrunc status=none

# ---- options and sizes ---------------------------------------------------
o=$out/fuzz_options
mkdir -p "$o"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    printf '%s' "$line" > "$o/opt$i"
done <<'EOF'
cluster_size=64K,compression_type=zstd
compat=0.10,refcount_bits=1,lazy_refcounts=on
extended_l2=on,cluster_size=2M
preallocation=metadata,backing_file=a,,b,backing_fmt=raw
help
1.5G
512
0.5k
9223372036854775807
8E
subformat=streamOptimized,adapter_type=lsilogic,zeroed_grain=on
cluster_size=512,,,,refcount_bits=64,compat=1.1
EOF
printf 'size=1M\0001.25M' > "$o/opt-nul"

echo "seeds in $out: $(find "$out" -type f | wc -l) files"
