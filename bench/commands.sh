#!/bin/bash
# The in-place commands against qemu-img: snapshot, rebase, commit, amend,
# bitmap, dd, and info/check/map on a larger image.  The inputs are made
# once by qemu-img and qemu-io in WORKDIR/cmd (a 2 GiB qcow2 holding some
# 320 MiB from genimg, with internal snapshots, persistent bitmaps, backing
# chains; a 4 GiB qcow2 holding 1.7 GiB in short runs, with 64 KiB and
# with 4 KiB clusters, for info, check and map).  Every run works on its
# own fresh copy of the images it changes (cp --reflink=never, synced),
# made and deleted outside the timed part; runs alternate diskimg / qemu-img, pair by pair.  After each pair (not
# timed) the changed images of both sides are checked with qemu-img check
# and their guest views compared with each other, so that both did the
# same work.  diskimg syncs every change it makes (its crash safety);
# qemu-img does not sync in place, so the 'dd' cases are shown also
# against qemu-img followed by sync.
#
# Prints the medians of wall time, the median of the pairwise ratios
# diskimg / qemu-img of the wall time and of the CPU time (user + system).
#
#   bench/commands.sh [-n PAIRS] [-c CASES] [WORKDIR]
#     -n PAIRS  alternated pairs per case (default $BENCH_RUNS or 5)
#     -c CASES  comma list of case names (default: all; -c help lists them)
#     WORKDIR   default $BENCH_DIR or bench/out
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${BENCH_RUNS:-5} cases=all
while getopts "n:c:" opt; do
    case $opt in
        n) runs=$OPTARG ;;
        c) cases=$OPTARG ;;
        *) echo "usage: $0 [-n PAIRS] [-c CASES] [WORKDIR]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
work=${1:-${BENCH_DIR:-$top/bench/out}}/cmd
diskimg=${DISKIMG:-$top/build/diskimg}
genimg=$top/build/tools/genimg
command -v qemu-img >/dev/null || { echo "qemu-img not installed" >&2; exit 1; }
command -v qemu-io >/dev/null || { echo "qemu-io not installed" >&2; exit 1; }
[ -x "$diskimg" ] && [ -x "$genimg" ] || { echo "build first: make all unit" >&2; exit 1; }
mkdir -p "$work"
. "$top/bench/lib.sh"   # median, pair_median

# qemu-io -c options writing COUNT runs of LEN at STRIDE from START with
# pattern bytes from PAT (runs not cluster-aligned: partial clusters)
writes() {
    local start=$1 stride=$2 count=$3 len=$4 pat=$5 i
    for i in $(seq 0 $((count - 1))); do
        printf -- '-c\nwrite -P %d %d %d\n' $(((pat + i) % 255 + 1)) $((start + i * stride)) "$len"
    done
}
qio() { # qemu-io on IMG with the writes given as arguments to writes()
    local img=$1; shift
    local IFS=$'\n'
    qemu-io -f qcow2 $(writes "$@") "$img" >/dev/null || exit 1
}
M=$((1 << 20))

# ---- inputs, made once -------------------------------------------------
make_inputs() {
    local d=$work/in
    [ -f "$d/done" ] && return
    rm -rf "$d"; mkdir -p "$d"
    echo "making the inputs in $d ..." >&2
    "$genimg" -s 7 -a 25 2G "$d/data.raw" || exit 1
    # plain.qcow2: the data, v3, no snapshots or bitmaps
    qemu-img convert -f raw -O qcow2 "$d/data.raw" "$d/plain.qcow2" || exit 1
    # snap.qcow2: two snapshots, each followed by 64 MiB of scattered writes
    cp "$d/plain.qcow2" "$d/snap.qcow2"
    qemu-img snapshot -c s1 "$d/snap.qcow2" || exit 1
    qio "$d/snap.qcow2" $((3 * M + 4096)) $((31 * M)) 64 $M 10
    qemu-img snapshot -c s2 "$d/snap.qcow2" || exit 1
    qio "$d/snap.qcow2" $((5 * M + 65536 + 512)) $((29 * M)) 64 $M 90
    # bm.qcow2: bitmaps b0, b1 (each with writes recorded) and an empty b2
    cp "$d/plain.qcow2" "$d/bm.qcow2"
    qemu-img bitmap --add "$d/bm.qcow2" b0 || exit 1
    qio "$d/bm.qcow2" $((7 * M)) $((23 * M)) 80 $((512 * 1024)) 20
    qemu-img bitmap --add "$d/bm.qcow2" b1 || exit 1
    qio "$d/bm.qcow2" $((11 * M + 8192)) $((17 * M)) 110 $((256 * 1024)) 30
    qemu-img bitmap --add -g 65536 "$d/bm.qcow2" b2 || exit 1
    # chain: base.qcow2 (the data) <- mid.qcow2 (96 MiB) <- top.qcow2 (96 MiB)
    cp "$d/plain.qcow2" "$d/base.qcow2"
    qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 "$d/mid.qcow2" || exit 1
    qio "$d/mid.qcow2" $((2 * M + 4096)) $((21 * M)) 96 $M 40
    qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 "$d/top.qcow2" || exit 1
    qio "$d/top.qcow2" $((9 * M + 65536)) $((19 * M)) 96 $M 60
    # new.qcow2: the data with 128 MiB changed (the new backing of a safe
    # rebase of top.qcow2 from mid.qcow2: they differ in part)
    cp "$d/plain.qcow2" "$d/new.qcow2"
    qio "$d/new.qcow2" $((M + 512)) $((15 * M)) 128 $M 120
    # big.qcow2: 4 GiB virtual, short runs (4K..256K) of data, zeros and holes
    "$genimg" -s 3 -a 50 -m 4096 -M 262144 4G "$d/big.raw" || exit 1
    qemu-img convert -f raw -O qcow2 "$d/big.raw" "$d/big.qcow2" || exit 1
    rm -f "$d/big.raw"
    # big4k.qcow2: the same with 4 KiB clusters (some 450000 of them)
    qemu-img convert -f qcow2 -O qcow2 -o cluster_size=4096 "$d/big.qcow2" "$d/big4k.qcow2" || exit 1
    for f in "$d"/*.qcow2; do qemu-img check -q "$f" || { echo "input $f not clean" >&2; exit 1; }; done
    touch "$d/done"
}
make_inputs
in=$work/in

# ---- cases --------------------------------------------------------------
# Each case: NAME, the input files copied into the run's folder (changed in
# place), the files read only (linked), the diskimg and qemu-img commands
# (run in the folder; D= and Q= are the tools), the images to check and
# compare afterwards, and an extra comparison (cmp of an output, or "").
all_cases="snap-c snap-l snap-a snap-d rebase-u rebase-safe rebase-none commit commit-b
amend-compat amend-refcount amend-lazy bitmap-add bitmap-merge bitmap-remove bitmap-clear
dd-raw dd-raw-sync dd-qcow2 dd-qcow2-sync info-big check-big map-big info-4k check-4k map-4k"
case_def() {
    # sets: copy, link, cd_, cq, checks, cmpf
    copy="" link="" checks="" cmpf=""
    case $1 in
        snap-c)   copy=snap.qcow2; cd_="D snapshot -c s3 snap.qcow2"; cq="Q snapshot -c s3 snap.qcow2"; checks=snap.qcow2 ;;
        snap-l)   link=snap.qcow2; cd_="D snapshot -l snap.qcow2"; cq="Q snapshot -l snap.qcow2" ;;
        snap-a)   copy=snap.qcow2; cd_="D snapshot -a s1 snap.qcow2"; cq="Q snapshot -a s1 snap.qcow2"; checks=snap.qcow2 ;;
        snap-d)   copy=snap.qcow2; cd_="D snapshot -d s1 snap.qcow2"; cq="Q snapshot -d s1 snap.qcow2"; checks=snap.qcow2 ;;
        rebase-u) copy=top.qcow2; link="mid.qcow2 base.qcow2 new.qcow2"
                  cd_="D rebase -u -b new.qcow2 -F qcow2 top.qcow2"; cq="Q rebase -u -b new.qcow2 -F qcow2 top.qcow2"; checks=top.qcow2 ;;
        rebase-safe) copy=top.qcow2; link="mid.qcow2 base.qcow2 new.qcow2"
                  cd_="D rebase -b new.qcow2 -F qcow2 top.qcow2"; cq="Q rebase -b new.qcow2 -F qcow2 top.qcow2"; checks=top.qcow2 ;;
        rebase-none) copy=top.qcow2; link="mid.qcow2 base.qcow2"
                  cd_="D rebase -b '' top.qcow2"; cq="Q rebase -b '' top.qcow2"; checks=top.qcow2 ;;
        commit)   copy="top.qcow2 mid.qcow2"; link=base.qcow2
                  cd_="D commit top.qcow2"; cq="Q commit top.qcow2"; checks="mid.qcow2 top.qcow2" ;;
        commit-b) copy="top.qcow2 mid.qcow2 base.qcow2"
                  cd_="D commit -b base.qcow2 top.qcow2"; cq="Q commit -b base.qcow2 top.qcow2"; checks="base.qcow2 top.qcow2" ;;
        amend-compat) copy=plain.qcow2; cd_="D amend -o compat=0.10 plain.qcow2"; cq="Q amend -o compat=0.10 plain.qcow2"; checks=plain.qcow2 ;;
        amend-refcount) copy=plain.qcow2; cd_="D amend -o refcount_bits=64 plain.qcow2"; cq="Q amend -o refcount_bits=64 plain.qcow2"; checks=plain.qcow2 ;;
        amend-lazy) copy=plain.qcow2; cd_="D amend -o lazy_refcounts=on plain.qcow2"; cq="Q amend -o lazy_refcounts=on plain.qcow2"; checks=plain.qcow2 ;;
        bitmap-add) copy=bm.qcow2; cd_="D bitmap --add bm.qcow2 b3"; cq="Q bitmap --add bm.qcow2 b3"; checks=bm.qcow2 ;;
        bitmap-merge) copy=bm.qcow2; cd_="D bitmap --merge b0 bm.qcow2 b2"; cq="Q bitmap --merge b0 bm.qcow2 b2"; checks=bm.qcow2 ;;
        bitmap-remove) copy=bm.qcow2; cd_="D bitmap --remove bm.qcow2 b1"; cq="Q bitmap --remove bm.qcow2 b1"; checks=bm.qcow2 ;;
        bitmap-clear) copy=bm.qcow2; cd_="D bitmap --clear bm.qcow2 b0"; cq="Q bitmap --clear bm.qcow2 b0"; checks=bm.qcow2 ;;
        dd-raw)   link=data.raw; cd_="D dd -f raw -O raw bs=1M skip=100 count=1124 if=data.raw of=out.raw"
                  cq="Q dd -f raw -O raw bs=1M skip=100 count=1124 if=data.raw of=out.raw"; cmpf=out.raw ;;
        dd-raw-sync) link=data.raw; cd_="D dd -f raw -O raw bs=1M skip=100 count=1124 if=data.raw of=out.raw"
                  cq="Q dd -f raw -O raw bs=1M skip=100 count=1124 if=data.raw of=out.raw && sync -f out.raw"; cmpf=out.raw ;;
        dd-qcow2) link=plain.qcow2; cd_="D dd -f qcow2 -O raw bs=64k skip=1000 count=20000 if=plain.qcow2 of=out.raw"
                  cq="Q dd -f qcow2 -O raw bs=64k skip=1000 count=20000 if=plain.qcow2 of=out.raw"; cmpf=out.raw ;;
        dd-qcow2-sync) link=plain.qcow2; cd_="D dd -f qcow2 -O raw bs=64k skip=1000 count=20000 if=plain.qcow2 of=out.raw"
                  cq="Q dd -f qcow2 -O raw bs=64k skip=1000 count=20000 if=plain.qcow2 of=out.raw && sync -f out.raw"; cmpf=out.raw ;;
        info-big) link=big.qcow2; cd_="D info big.qcow2"; cq="Q info big.qcow2" ;;
        check-big) link=big.qcow2; cd_="D check big.qcow2"; cq="Q check big.qcow2" ;;
        map-big)  link=big.qcow2; cd_="D map --output=json big.qcow2"; cq="Q map --output=json big.qcow2"; cmpf=stdout ;;
        info-4k)  link=big4k.qcow2; cd_="D info big4k.qcow2"; cq="Q info big4k.qcow2" ;;
        check-4k) link=big4k.qcow2; cd_="D check big4k.qcow2"; cq="Q check big4k.qcow2" ;;
        map-4k)   link=big4k.qcow2; cd_="D map --output=json big4k.qcow2"; cq="Q map --output=json big4k.qcow2"; cmpf=stdout ;;
        *) return 1 ;;
    esac
}
if [ "$cases" = help ]; then echo $all_cases; exit 0; fi
[ "$cases" = all ] && cases=$all_cases

# prep DIR: a fresh folder with fresh copies of $copy and links to $link
prep() {
    local dir=$1 f
    rm -rf "$dir"; mkdir -p "$dir"
    for f in $copy; do cp --reflink=never "$in/$f" "$dir/$f" || exit 1; done
    for f in $link; do ln "$in/$f" "$dir/$f"; done
    sync
}

# timed NAME DIR CMD: run CMD in DIR; append wall time to NAME.times and CPU
# time (user + system of the command and its children) to NAME.cpu
timed() {
    local name=$1 dir=$2 cmd=$3
    local TIMEFORMAT='%R %U %S'
    { time (cd "$dir" && D() { "$diskimg" "$@"; } && Q() { qemu-img "$@"; } &&
            eval "$cmd" >"$dir/stdout" 2>"$dir/stderr"); } 2>"$work/last.time" ||
        { cat "$dir/stderr" >&2; echo "FAILED ($name): $cmd" >&2; exit 1; }
    awk '{ printf "%.4f\n", $1 }' "$work/last.time" >>"$work/$name.times"
    awk '{ printf "%.4f\n", $2 + $3 }' "$work/last.time" >>"$work/$name.cpu"
}

# verify: both sides' changed images clean and with the same guest view
verify() {
    local c=$1 a=$work/a b=$work/b f
    for f in $checks; do
        qemu-img check -q "$a/$f" || echo "  $c: diskimg's $f not clean" >&2
        qemu-img check -q "$b/$f" || echo "  $c: qemu-img's $f not clean" >&2
        (cd "$a" && qemu-img compare -q "$f" "$b/$f") ||
            echo "  $c: $f differs between diskimg's and qemu-img's run" >&2
    done
    case $c in snap-*)
        [ "$(qemu-img snapshot -l "$a/snap.qcow2" | awk 'NR>2 {print $2}')" = \
          "$(qemu-img snapshot -l "$b/snap.qcow2" | awk 'NR>2 {print $2}')" ] ||
            echo "  $c: snapshot names differ" >&2 ;;
    bitmap-*)
        [ "$(qemu-img info --output=json "$a/bm.qcow2" | jq -c '.["format-specific"].data.bitmaps')" = \
          "$(qemu-img info --output=json "$b/bm.qcow2" | jq -c '.["format-specific"].data.bitmaps')" ] ||
            echo "  $c: bitmaps differ" >&2
        ;;
    esac
    [ -n "$cmpf" ] && { cmp -s "$a/$cmpf" "$b/$cmpf" || echo "  $c: $cmpf differs" >&2; }
    return 0
}

# warm the inputs (every run reads them, or copies of them, from the page cache)
cat "$in"/* >/dev/null
printf '%-15s %10s %10s %7s %9s   %s\n' case diskimg qemu-img ratio 'CPU ratio' 'wall ratios pair by pair'
for c in ${cases//,/ }; do
    case_def "$c" || { echo "unknown case $c (-c help lists them)" >&2; exit 2; }
    rm -f "$work"/{d,q}.{times,cpu}
    for i in $(seq 1 "$runs"); do
        prep "$work/a"; timed d "$work/a" "$cd_"
        prep "$work/b"; timed q "$work/b" "$cq"
        verify "$c"
    done
    rm -rf "$work/a" "$work/b"
    td=$(median <"$work/d.times") tq=$(median <"$work/q.times")
    r=$(pair_median "$work/d.times" "$work/q.times")
    rc=$(paste "$work/d.cpu" "$work/q.cpu" | awk '{ printf "%.4f\n", ($1 + .001) / ($2 + .001) }' | median)
    pairs=$(paste "$work/d.times" "$work/q.times" | awk '{ printf " %.2f", $1 / $2 }')
    printf '%-15s %9.3fs %9.3fs %7.2f %9.2f  %s\n' "$c" "$td" "$tq" "$r" "$rc" "$pairs"
done
echo "(times: medians of $runs alternated pairs, wall; ratios: median of the pairwise"
echo " ratios diskimg/qemu-img, of wall and of CPU time (user + system);"
echo " $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
