#!/bin/bash
# qcow2 output benchmark: diskimg convert against qemu-img convert on the
# bench disk (genimg -s 1 4G: random, text, zeros and holes in runs of
# 4K..8M).  Runs alternate (diskimg, qemu-img, qemu-img -W -m 16, diskimg,
# ...) so that a noisy machine hurts all sides alike; each output goes to a
# fresh name and is deleted (and the page cache flushed) outside the timed
# part.  Like for like: qemu-img convert never fsyncs, so diskimg runs with
# -t unsafe.  Prints median times, the ratios diskimg/qemu-img and the
# output sizes.
#
#   bench/qcow2.sh [-n RUNS] [-s SIZE] [-k] [-c CASES] [WORKDIR]
#     WORKDIR   default $BENCH_DIR or bench/out
#     -n RUNS   runs per tool and case (default $BENCH_RUNS or 3; medians)
#     -s SIZE   bench disk size (default $BENCH_SIZE or 4G; the disk file is
#               shared with bench/run.sh: WORKDIR/disk-SIZE.raw)
#     -k        keep the last outputs (for a look with qemu-img)
#     -c CASES  comma list of: plain,zlib,zstd (raw -> qcow2), toraw,
#               zlib-toraw (a qemu-img-made qcow2, plain or zlib, -> raw),
#               existing (raw -> an empty qcow2 made by qemu-img create,
#               with -n; made outside the timed part) (default all)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${BENCH_RUNS:-3} size=${BENCH_SIZE:-4G} keep=0 cases=plain,zlib,zstd,toraw,zlib-toraw,existing
while getopts "n:s:kc:" opt; do
    case $opt in
        n) runs=$OPTARG ;;
        s) size=$OPTARG ;;
        k) keep=1 ;;
        c) cases=$OPTARG ;;
        *) echo "usage: $0 [-n RUNS] [-s SIZE] [-k] [-c CASES] [WORKDIR]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
work=${1:-${BENCH_DIR:-$top/bench/out}}
diskimg=${DISKIMG:-$top/build/diskimg}
genimg=$top/build/tools/genimg
command -v qemu-img >/dev/null || { echo "qemu-img not installed" >&2; exit 1; }
[ -x "$diskimg" ] && [ -x "$genimg" ] || { echo "build first: make all unit" >&2; exit 1; }
mkdir -p "$work"
disk=$work/disk-$size.raw
[ -f "$disk" ] || "$genimg" -s 1 "$size" "$disk" || exit 1
cat "$disk" >/dev/null   # the source is read from the page cache by every run

. "$top/bench/lib.sh"   # now, median, pair_median
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }

# time_run NAME OUT CMD... : append the wall time to $work/NAME.times
time_run() {
    local name=$1 out=$2; shift 2
    rm -f "$out"
    [ "$precreate" = 1 ] && { qemu-img create -q -f qcow2 "$out" "$size" || exit 1; }
    sync
    local t0; t0=$(now)
    "$@" || { echo "FAILED: $*" >&2; exit 1; }
    awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.3f\n", a - b }' >>"$work/$name.times"
    stat -c %s "$out" >"$work/$name.size"
    [ "$keep" = 1 ] || rm -f "$out"
}

printf '%-10s %10s %10s %10s %8s %8s %12s %12s\n' case diskimg qemu qemu-W16 ratio ratio-W size size/qemu
# qcow2 sources for the -> raw cases, made once by qemu-img
qsrc() {
    local f=$work/disk-$size.$1.qcow2
    [ -f "$f" ] || qemu-img convert -O qcow2 ${2:+"$2"} "$disk" "$f" || exit 1
    cat "$f" >/dev/null
    echo "$f"
}

for c in ${cases//,/ }; do
    src=$disk ofmt=qcow2 precreate=0
    case $c in
        plain) flags=(); opts=() ;;
        zlib)  flags=(-c); opts=() ;;
        zstd)  flags=(-c); opts=(-o compression_type=zstd) ;;
        toraw) flags=(); opts=(); src=$(qsrc plain); ofmt=raw ;;
        zlib-toraw) flags=(); opts=(); src=$(qsrc zlib -c); ofmt=raw ;;
        existing) flags=(-n); opts=(); precreate=1 ;;
        *) echo "unknown case $c" >&2; exit 2 ;;
    esac
    rm -f "$work"/{d,q,w}.times
    for i in $(seq 1 "$runs"); do
        time_run d "$work/d$i.out" "$diskimg" convert -t unsafe -O $ofmt "${flags[@]}" "${opts[@]}" "$src" "$work/d$i.out"
        time_run q "$work/q$i.out" qemu-img convert -O $ofmt "${flags[@]}" "${opts[@]}" "$src" "$work/q$i.out"
        time_run w "$work/w$i.out" qemu-img convert -W -m 16 -O $ofmt "${flags[@]}" "${opts[@]}" "$src" "$work/w$i.out"
    done
    td=$(median <"$work/d.times") tq=$(median <"$work/q.times") tw=$(median <"$work/w.times")
    rq=$(pair_median "$work/d.times" "$work/q.times")
    rw=$(pair_median "$work/d.times" "$work/w.times")
    sd=$(cat "$work/d.size") sq=$(cat "$work/q.size")
    printf '%-10s %9.2fs %9.2fs %9.2fs %8.3f %8.3f %12d %12.4f\n' "$c" "$td" "$tq" "$tw" \
        "$rq" "$rw" "$sd" "$(div "$sd" "$sq")"
done
echo "(times: medians of $runs runs; ratio: median of the pairwise ratios diskimg/qemu-img;"
echo " sizes: file sizes (raw outputs: the virtual size); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
