# bash completion for diskimg                               -*- shell-script -*-
#
# Install as $(PREFIX)/share/bash-completion/completions/diskimg, or source
# it from ~/.bashrc.
#
# Commands and options are read from the program's own help texts
# (`diskimg --help`, `diskimg CMD --help`, asked once per shell and cached),
# so the completion always matches the binary being completed, whichever
# version it is.  An option line there looks like
#     "  -f FMT            format ... (raw, qcow2, vmdk, vpc, vdi, ova)"
#     "  --output=human|json output form"
#     "  -v, --verbose     report ..."
# Option values: formats after FMT options (the list in the option's text,
# else every format), cache modes after CACHE options, "secret,id=" after
# --object OBJ, the listed choices
# after --opt=a|b, file names after file arguments and for operands.
# dd's NAME=VALUE operands ("  if=INPUT   the input image") are offered
# instead of file names; file names after if= and of=.

declare -gA _diskimg_help_cache

_diskimg_formats="raw qcow2 vmdk vpc vhd vhdx vdi ova"
_diskimg_cache_modes="none writeback unsafe writethrough directsync"

# _diskimg_help BIN [CMD]: the help text in REPLY (cached).
_diskimg_help()
{
    local key="$1|${2-}"
    if [[ -z ${_diskimg_help_cache[$key]+set} ]]; then
        if [[ -n ${2-} ]]; then
            _diskimg_help_cache[$key]=$("$1" "$2" --help 2>/dev/null)
        else
            _diskimg_help_cache[$key]=$("$1" --help 2>/dev/null)
        fi
    fi
    REPLY=${_diskimg_help_cache[$key]}
}

# _diskimg_commands BIN: command names (the two-space-indented words of the
# "Commands:" section of the top-level help) in REPLY.
_diskimg_commands()
{
    local line in=0 cmds=""
    _diskimg_help "$1"
    while IFS= read -r line; do
        if [[ $line == Commands:* ]]; then
            in=1
        elif ((in)) && [[ -z $line ]]; then
            break
        elif ((in)) && [[ $line =~ ^\ \ ([a-z][a-z0-9-]*)( |$) ]]; then
            cmds+="${BASH_REMATCH[1]} "
        fi
    done <<<"$REPLY"
    REPLY=$cmds
}

# _diskimg_options BIN CMD: sets _diskimg_opts (every option, "--x=" for
# options written --x=VALUES), _diskimg_operands (dd's "name=" operands)
# and _diskimg_arg[OPT] = what its argument is: "fmt:LIST", "cache",
# "file", "list:LIST" or "any".
_diskimg_options()
{
    local line spec desc tok last kind
    local -a toks
    _diskimg_opts=(--help)
    _diskimg_operands=()
    _diskimg_arg=()
    _diskimg_help "$1" "$2"
    while IFS= read -r line; do
        if [[ $line =~ ^\ \ ([a-z]+)=([A-Z_]+)(\ |$) ]]; then
            _diskimg_operands+=("${BASH_REMATCH[1]}=")
            case ${BASH_REMATCH[2]} in
            INPUT | OUTPUT) _diskimg_arg[${BASH_REMATCH[1]}]=file ;;
            *) _diskimg_arg[${BASH_REMATCH[1]}]=any ;;
            esac
            continue
        fi
        [[ $line =~ ^\ +- ]] || continue
        # the option column ends at the first run of two spaces
        spec=${line#"${line%%[! ]*}"}
        desc=""
        if [[ $spec =~ ^([^ ]+( [^ ]+)*)\ \ +(.*)$ ]]; then
            spec=${BASH_REMATCH[1]}
            desc=${BASH_REMATCH[3]}
        fi
        read -ra toks <<<"$spec"
        last=""
        for tok in "${toks[@]}"; do
            if [[ $tok == -* ]]; then
                tok=${tok%,}
                tok=${tok%%\[*}        # "--foo[=N]": an optional value
                if [[ $tok == --*=* ]]; then
                    _diskimg_opts+=("${tok%%=*}=")
                    _diskimg_arg[${tok%%=*}]="list:${tok#*=}"
                    break
                fi
                _diskimg_opts+=("$tok")
                last=$tok
            elif [[ -n $last && -z ${_diskimg_arg[$last]+set} ]]; then
                case $tok in
                FMT)
                    kind="fmt:"
                    [[ $desc =~ \(([a-z0-9]+(,\ [a-z0-9]+)+)\) ]] &&
                        kind="fmt:${BASH_REMATCH[1]//, /|}"
                    ;;
                CACHE) kind=cache ;;
                OBJ) kind="list:secret,id=" ;;  # --object: the usual start
                FILE | BACKING | BASE | IMG | SRC | DST | PATH) kind=file ;;
                [A-Z]*) kind=any ;;
                *) kind="list:$tok" ;;  # a literal value, e.g. "-f raw"
                esac
                # "-v, --verbose": the argument belongs to every spelling
                local o
                for o in "${toks[@]}"; do
                    o=${o%,}
                    [[ $o == -* ]] && _diskimg_arg[$o]=$kind
                    [[ $o == "$last" ]] && break
                done
            else
                break
            fi
        done
    done <<<"$REPLY"
}

# _diskimg_values KIND CUR: fill COMPREPLY with the argument values.
_diskimg_values()
{
    local kind=$1 cur=$2 list
    case $kind in
    fmt:) list=$_diskimg_formats ;;
    fmt:* | list:*) list=${kind#*:}; list=${list//|/ } ;;
    cache) list=$_diskimg_cache_modes ;;
    file)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return
        ;;
    *) COMPREPLY=(); return ;;
    esac
    mapfile -t COMPREPLY < <(compgen -W "$list" -- "$cur")
}

_diskimg()
{
    local cur=${COMP_WORDS[COMP_CWORD]} bin=${COMP_WORDS[0]}
    local cmd="" i w prev="" opt=""
    local -a _diskimg_opts _diskimg_operands
    local -A _diskimg_arg
    COMPREPLY=()
    [[ $bin == "~"* ]] && bin=${bin/#\~/$HOME}

    # the command: the first word after the program name
    if ((COMP_CWORD == 1)); then
        _diskimg_commands "$bin"
        mapfile -t COMPREPLY < <(compgen -W "$REPLY --help --version" -- "$cur")
        return
    fi
    cmd=${COMP_WORDS[1]}
    _diskimg_options "$bin" "$cmd"

    # "--opt=value": bash splits it into "--opt" "=" "value" (COMP_WORDBREAKS)
    if [[ $cur == "=" ]]; then
        opt=${COMP_WORDS[COMP_CWORD - 1]}
        cur=""
    elif ((COMP_CWORD >= 3)) && [[ ${COMP_WORDS[COMP_CWORD - 1]} == "=" ]]; then
        opt=${COMP_WORDS[COMP_CWORD - 2]}
    elif [[ $cur == --*=* ]]; then
        # one word when '=' is not a word break: complete the whole word
        opt=${cur%%=*}
        _diskimg_values "${_diskimg_arg[$opt]-}" "${cur#*=}"
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[i]="$opt=${COMPREPLY[i]}"
        done
        return
    fi
    if [[ -n $opt ]]; then
        _diskimg_values "${_diskimg_arg[$opt]-}" "$cur"
        return
    fi

    # the argument of the previous option ("-f qcow2", "--output json")
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    if ((COMP_CWORD >= 3)) && [[ $prev == -* && $prev != *=* &&
        ${COMP_WORDS[COMP_CWORD - 2]} != "=" && -n ${_diskimg_arg[$prev]+set} ]]; then
        _diskimg_values "${_diskimg_arg[$prev]}" "$cur"
        return
    fi

    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "${_diskimg_opts[*]}" -- "$cur")
        for w in "${COMPREPLY[@]}"; do
            [[ $w == *= ]] && compopt -o nospace 2>/dev/null && break
        done
        return
    fi
    if ((${#_diskimg_operands[@]})); then
        mapfile -t COMPREPLY < <(compgen -W "${_diskimg_operands[*]}" -- "$cur")
        compopt -o nospace 2>/dev/null
        return
    fi
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}

complete -F _diskimg diskimg
