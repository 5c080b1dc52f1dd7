# bash completion for gkc, the command-line client of gkcd.
#
# Commands and each command's options are read from gkc's own --help, so the
# completion follows whichever gkc is on PATH; a fixed list covers a gkc that
# cannot run.
_gkc() {
  local cur prev words cword
  _init_completion || return

  local i cmd=
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --socket) ((i++)) ;;
      -*) ;;
      *) cmd=${words[i]}; break ;;
    esac
  done

  case $prev in
    --socket) _filedir sock; [[ ${#COMPREPLY[@]} -gt 0 ]] || _filedir; return ;;
    --a | --b | --c | --x | --out | --y)
      _filedir npy
      return ;;
    --matrix) _filedir '@(mtx|mtx.gz)'; return ;;
    --op) COMPREPLY=($(compgen -W "sum min max" -- "$cur")); return ;;
    --precond) COMPREPLY=($(compgen -W "none jacobi amg auto" -- "$cur")); return ;;
    --precision)
      if [[ $cmd == solve ]]; then COMPREPLY=($(compgen -W "fp64 fp32" -- "$cur"))
      else COMPREPLY=($(compgen -W "fp32 tf32" -- "$cur")); fi
      return ;;
    --devices) COMPREPLY=($(compgen -W "all" -- "$cur")); return ;;
    --dtype) COMPREPLY=($(compgen -W "f32 f64" -- "$cur")); return ;;
    --random | --seed | --interval | --iterations | --algo | --alpha | --beta) return ;;
  esac

  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W "--socket --json --no-shm --help --version" -- "$cur"))
    else
      local cmds
      cmds=$("${words[0]}" --help 2>/dev/null |
             sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p')
      [[ -n $cmds ]] || cmds="ping status sgemm reduce dot nrm2 axpby spmv solve batch metrics top"
      COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
    fi
    return
  fi
  if [[ $cur == -* ]]; then
    local opts
    opts=$("${words[0]}" "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
    [[ -n $opts ]] || opts="--socket --json --no-shm --help"
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
}
complete -F _gkc gkc
