#!/bin/bash
# Copy offload benchmark: diskimg convert (offload on by default) against
# qemu-img convert -C (copy_file_range, no zero detection) and qemu-img's
# default, on loop-mounted XFS (reflink=1) and btrfs, for raw -> raw,
# qcow2 -> raw, raw -> qcow2 and qcow2 -> qcow2.  Runs alternate (diskimg,
# qemu-img -C, qemu-img, diskimg, ...), each to a fresh output name that is
# deleted outside the timed part; ratios are taken pair by pair and their
# median reported.  Like for like: qemu-img never fsyncs, so diskimg runs
# with -t unsafe.  Also prints the outputs' allocated bytes (du) of one run
# of each: diskimg's must not exceed diskimg --copy-offload=off's.  Needs
# root (loop mounts), xfsprogs, btrfs-progs, qemu-img.
# The last two columns: the allocated bytes of one output each way.
#
#   bench/offload.sh [-n RUNS] [-s SIZE] [-f FSLIST] [WORKDIR]
#     -n RUNS   pairs per case (default $BENCH_RUNS or 5)
#     -s SIZE   corpus size (default 256M; genimg -s 1: random, text, written
#               zeros and holes in runs of 4K..8M)
#     -f FSLIST comma list of xfs,btrfs,ext4 (default xfs,btrfs; on ext4
#               offload is copy_file_range, an in-kernel copy)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${BENCH_RUNS:-5} size=256M fslist=xfs,btrfs
while getopts "n:s:f:" opt; do
    case $opt in
        n) runs=$OPTARG ;;
        s) size=$OPTARG ;;
        f) fslist=$OPTARG ;;
        *) echo "usage: $0 [-n RUNS] [-s SIZE] [-f xfs,btrfs] [WORKDIR]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
work=${1:-${BENCH_DIR:-$top/bench/out}}
diskimg=${DISKIMG:-$top/build/diskimg}
genimg=$top/build/tools/genimg
command -v qemu-img >/dev/null || { echo "qemu-img not installed" >&2; exit 1; }
[ -x "$diskimg" ] && [ -x "$genimg" ] || { echo "build first: make all unit" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (loop mounts)" >&2; exit 1; }
mkdir -p "$work"
. "$top/bench/lib.sh"   # now, median, pair_median

mnt=""
cleanup() { [ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -f "$work"/offload-*.fsimg; }
trap cleanup EXIT

# timed OUT CMD...: wall seconds of CMD; OUT removed afterwards (untimed)
timed() {
    local out=$1; shift
    rm -f "$out"
    sync
    local t0; t0=$(now)
    "$@" >/dev/null 2>"$work/offload.err" || { cat "$work/offload.err" >&2; echo "FAILED: $*" >&2; exit 1; }
    awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.4f\n", a - b }'
    rm -f "$out"
}

printf '%-6s %-14s %9s %9s %9s %10s %10s %12s %12s\n' fs case diskimg 'qemu -C' qemu \
    'd/qemu-C' 'd/qemu' 'alloc d' 'alloc off'
for fs in ${fslist//,/ }; do
    img=$work/offload-$fs.fsimg mnt=$work/mnt-$fs
    truncate -s 4G "$img"
    case $fs in
        xfs) mkfs.xfs -q -f -m reflink=1 "$img" ;;
        btrfs) mkfs.btrfs -q -f "$img" ;;
        ext4) mkfs.ext4 -q -F "$img" ;;
    esac >/dev/null || exit 1
    mkdir -p "$mnt"
    mount -o loop "$img" "$mnt" || exit 1
    "$genimg" -s 1 "$size" "$mnt/src.raw" || exit 1
    qemu-img convert -f raw -O qcow2 "$mnt/src.raw" "$mnt/src.qcow2" || exit 1
    cat "$mnt/src.raw" "$mnt/src.qcow2" >/dev/null
    for c in raw-raw qcow2-raw raw-qcow2 qcow2-qcow2; do
        src=$mnt/src.${c%-*} ofmt=${c#*-}
        sfmt=${c%-*}
        : >"$work/d.t"; : >"$work/c.t"; : >"$work/q.t"
        for i in $(seq 1 "$runs"); do
            o=$mnt/out-$i
            timed "$o.d" "$diskimg" convert -t unsafe -f "$sfmt" -O "$ofmt" "$src" "$o.d" >>"$work/d.t"
            timed "$o.c" qemu-img convert -C -f "$sfmt" -O "$ofmt" "$src" "$o.c" >>"$work/c.t"
            timed "$o.q" qemu-img convert -f "$sfmt" -O "$ofmt" "$src" "$o.q" >>"$work/q.t"
        done
        # allocation of one output each way (untimed)
        "$diskimg" convert -t unsafe -f "$sfmt" -O "$ofmt" "$src" "$mnt/a.d" || exit 1
        "$diskimg" convert --copy-offload=off -t unsafe -f "$sfmt" -O "$ofmt" "$src" "$mnt/a.off" || exit 1
        ad=$(( $(stat -c %b "$mnt/a.d") * 512 )) aoff=$(( $(stat -c %b "$mnt/a.off") * 512 ))
        rm -f "$mnt/a.d" "$mnt/a.off"
        printf '%-6s %-14s %9.4f %9.4f %9.4f %10.2f %10.2f %12d %12d\n' "$fs" "$c" \
            "$(median <"$work/d.t")" "$(median <"$work/c.t")" "$(median <"$work/q.t")" \
            "$(pair_median "$work/d.t" "$work/c.t")" "$(pair_median "$work/d.t" "$work/q.t")" \
            "$ad" "$aoff"
    done
    umount "$mnt"; mnt=""
    rm -f "$img"
done
