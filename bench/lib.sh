# Shared by bench/*.sh: alternate two commands (A B A B ...), time each run,
# take the ratio A/B pair by pair and report the median.  Every run writes to
# a fresh output name; outputs are deleted outside the timed part.
set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
D=$TOP/diskimg
OUT=${BENCH_DIR:-$TOP/bench/out}
RUNS=${BENCH_RUNS:-5}
mkdir -p "$OUT"

now() { date +%s.%N; }

# bench_disk SIZE: the seeded bench disk (mixed random/text/zeros/holes,
# runs of 4 KiB to 8 MiB at unaligned offsets), made once.
bench_disk() {
    local size=${1:-4G} f=$OUT/disk-$1.raw
    [ -f "$f" ] || "$TOP/build/tools/genimg" -s 1 "$size" "$f" >&2
    echo "$f"
}

warm() { cat "$@" > /dev/null; }

# time_cmd OUTFILE CMD...: seconds taken by CMD (OUTFILE removed afterwards)
time_cmd() {
    local out=$1; shift
    local s e
    sync
    s=$(now)
    "$@" >/dev/null 2>"$OUT/last.err" || { cat "$OUT/last.err" >&2; echo "FAILED: $*" >&2; }
    e=$(now)
    rm -f "$out"
    awk "BEGIN{printf \"%.3f\", $e - $s}"
}

median() { sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2 }'; }

# pair_median A_TIMES B_TIMES: the median of the ratios A/B of the two
# files' lines taken pair by pair (run i of A against run i of B)
pair_median() { paste "$1" "$2" | awk '{printf "%.4f\n", $1 / $2}' | median; }

# ab NAME "A command with @OUT@" "B command with @OUT@": prints a result line
ab() {
    local name=$1 a=$2 b=$3 i ta tb ratios="" as="" bs=""
    for i in $(seq 1 "$RUNS"); do
        ta=$(time_cmd "$OUT/a$i.out" bash -c "${a//@OUT@/$OUT/a$i.out}")
        tb=$(time_cmd "$OUT/b$i.out" bash -c "${b//@OUT@/$OUT/b$i.out}")
        as="$as $ta"; bs="$bs $tb"
        ratios="$ratios $(awk "BEGIN{printf \"%.3f\", $ta / $tb}")"
    done
    local ma mb mr
    ma=$(echo $as | tr ' ' '\n' | median)
    mb=$(echo $bs | tr ' ' '\n' | median)
    mr=$(echo $ratios | tr ' ' '\n' | median)
    printf '%-44s %8.3f s %8.3f s   ratio %5.2f  (pairs:%s)\n' "$name" "$ma" "$mb" "$mr" "$ratios"
}
