#!/bin/bash
# The bash completion script offers every command of `diskimg --help` and
# every option of each `diskimg CMD --help`, formats after -f/-O/-F, cache
# modes after -t/-T, --output= values, and file names for operands.  The
# completion function is called as bash calls it: COMP_WORDS split at '='
# (bash's COMP_WORDBREAKS), COMP_CWORD the word under the cursor.
. "$(dirname "$0")/lib.sh"
# asan: skip
SCRIPT=$TOP/scripts/diskimg-completion.bash
[ -f "$SCRIPT" ] || fail "no $SCRIPT"
bash -n "$SCRIPT" || fail "syntax error in $SCRIPT"

# offers WORD... -- EXPECTED...: completing WORDS (the last one is under the
# cursor) offers each EXPECTED; "-- !X" means X must not be offered
cat > "$T/run.sh" <<'EOF'
. "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
_diskimg
printf '%s\n' "${COMPREPLY[@]}"
EOF
offers() {
    local words=() w
    while [ "$1" != -- ]; do words+=("$1"); shift; done; shift
    bash "$T/run.sh" "$SCRIPT" "$DISKIMG" "${words[@]}" > "$T/reply" 2> "$T/reply.err" ||
        fail "completion function failed for '${words[*]}': $(cat "$T/reply.err")"
    [ -s "$T/reply.err" ] && fail "completion printed errors for '${words[*]}': $(cat "$T/reply.err")"
    for w in "$@"; do
        if [ "${w#!}" != "$w" ]; then
            grep -qxF -- "${w#!}" "$T/reply" && fail "'${words[*]}' offers ${w#!}: $(tr '\n' ' ' < "$T/reply")"
        else
            grep -qxF -- "$w" "$T/reply" || fail "'${words[*]}' does not offer $w: $(tr '\n' ' ' < "$T/reply")"
        fi
    done
    return 0
}

# the script registers itself for diskimg
bash -c ". '$SCRIPT'; complete -p diskimg" | grep -q -- "-F _diskimg diskimg" || fail "not registered"

# every command the program lists, and every option of each command's help
cmds=$("$DISKIMG" --help | awk '/^Commands:/ {on=1; next} on && /^$/ {exit} on && /^  [a-z]/ {print $1}')
[ -n "$cmds" ] || fail "no commands found in diskimg --help"
for c in map compare; do echo "$cmds" | grep -qx "$c" || fail "diskimg --help does not list $c"; done
offers "" -- $cmds --help --version
for c in $cmds; do
    offers "${c:0:2}" -- "$c"
    "$DISKIMG" "$c" --help > "$T/help" || fail "$c --help"
    # option lines start with spaces and a dash; take each -x / --long there
    opts=$(grep -E '^ +-' "$T/help" | sed -E 's/^ +//; s/  .*//' |
           grep -oE -- '(^|[ ,])--?[A-Za-z0-9][A-Za-z0-9-]*=?' | tr -d ' ,' | sort -u)
    [ -n "$opts" ] || fail "no options found in '$c --help'"
    offers "$c" - -- $opts --help
    for o in $opts; do
        case $o in --*) offers "$c" "${o:0:4}" -- "$o" ;; esac
    done
done

# option values
offers convert -f "" -- raw qcow2 vmdk vpc vdi ova
offers convert -O "" -- raw qcow2 vmdk vpc vhdx vdi '!ova'
offers create -f v -- vmdk vpc vhdx vdi
offers measure -O "" -- raw qcow2 vpc vhdx vdi
offers convert -O q -- qcow2 '!raw'
offers compare -F "" -- raw qcow2 vmdk
offers compare -f v -- vmdk vpc vdi
offers amend -f "" -- qcow2 raw
offers amend -t "" -- none writeback unsafe
offers amend --im -- --image-opts
offers info --ob -- --object
offers check --object "" -- secret,id=
offers convert - -- --image-opts --target-image-opts --object
offers check -T "" -- none writeback unsafe
offers rebase -t "" -- none writethrough
offers convert -t "" -- none writeback unsafe writethrough directsync
offers convert -T w -- writeback writethrough '!none'
offers info --output = "" -- human json
offers info --output = -- human json
offers map --output = j -- json '!human'
offers map --output "" -- human json
offers compare --progress = "" -- json
offers convert --copy-offload = "" -- auto off required
offers convert - -- -C --copy-offload=
offers convert -m "" -- '!raw'
# dd's operands, and file names after if= and of=
offers dd "" -- bs= count= skip= if= of= '!-f'
offers dd i -- if= '!of='
touch "$T/ddinput.img"
offers dd if = "$T/ddin" -- "$T/ddinput.img"
offers dd of = "$T/ddin" -- "$T/ddinput.img"
offers dd -O "" -- raw qcow2 vmdk vpc vdi
offers dd --output-format "" -- raw qcow2 '!ova'
offers dd bs = "" -- '!raw'
# an option with '=' asks for no trailing space
bash -c ". '$SCRIPT'; compopt() { echo \"compopt \$*\"; }; COMP_WORDS=('$DISKIMG' info --out); COMP_CWORD=2; _diskimg" |
    grep -q "compopt -o nospace" || fail "--output= gets a trailing space"

# file names for operands and file arguments
mkdir -p "$T/files/sub"
: > "$T/files/disk1.qcow2"; : > "$T/files/disk2.raw"
offers map "$T/files/di" -- "$T/files/disk1.qcow2" "$T/files/disk2.raw"
offers compare "$T/files/disk1.qcow2" "$T/files/disk2" -- "$T/files/disk2.raw" '!'"$T/files/disk1.qcow2"
offers convert -f qcow2 "$T/files/s" -- "$T/files/sub"
offers convert -B "$T/files/disk1" -- "$T/files/disk1.qcow2"
offers info --output = json "$T/files/disk2" -- "$T/files/disk2.raw"
offers commit -b "$T/files/disk1" -- "$T/files/disk1.qcow2"
offers commit -t "" -- none writeback unsafe
offers commit -q "$T/files/disk2" -- "$T/files/disk2.raw"
exit 0
