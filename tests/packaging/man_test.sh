#!/usr/bin/env bash
# man_test.sh: the manual pages render without a warning, and the bash
# completion offers gkc's commands and a command's options.
#   bash tests/packaging/man_test.sh BUILD_DIR SOURCE_DIR GKC_BINARY
set -euo pipefail
build=$1 src=$2 gkc=$3
command -v man >/dev/null || { echo "skip: man (man-db) not installed"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [[ -z ${2-} ]] || sed 's/^/     | /' <<<"$2" | head -20; }

pages=("$build/man/gkc.h.3")
if [[ -e $build/man/gkcd.8 ]]; then
  pages+=("$build/man/gkcd.8" "$build/man/gkc.1")
else
  bad "gkcd.8 and gkc.1 were not built (help2man missing at configure time?)"
fi
for p in "${pages[@]}"; do
  out=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$p" 2>&1 >/dev/null) || true
  text=$(MANWIDTH=80 man -E UTF-8 -l "$p" 2>/dev/null)
  name=$(basename "$p")
  if [[ -n $out ]]; then bad "$name renders with warnings" "$out"
  elif ! grep -q "^NAME" <<<"$text" || ! grep -q "SEE ALSO" <<<"$text"; then bad "$name lacks NAME or SEE ALSO" "$text"
  else ok "$name renders without warnings"; fi
done
if [[ -e $build/man/gkcd.8 ]]; then
  text=$(MANWIDTH=200 man -l "$build/man/gkcd.8" 2>/dev/null)
  grep -q -- "--metrics-listen" <<<"$text" && grep -q -- "--max-request-bytes" <<<"$text" &&
    ok "gkcd(8) lists the options from --help" || bad "gkcd(8) lacks options"
fi

# Completion, driven as bash would: COMP_WORDS/COMP_CWORD, then COMPREPLY.
compl=$src/completion/gkc.bash
bc=/usr/share/bash-completion/bash_completion
if [[ ! -r $bc ]]; then
  echo "skip: bash-completion not installed: completion not exercised"
else
  complete_words() { # WORDS... -> the candidates, one a line
    bash -c '
      source "$1"; source "$2"; shift 2
      COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
      COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
      _gkc; printf "%s\n" "${COMPREPLY[@]}"' _ "$bc" "$compl" "$@"
  }
  got=$(complete_words "$gkc" "" | sort | tr '\n' ' ')
  want="axpby batch dot metrics nrm2 ping reduce sgemm solve spmv status top "
  [[ $got == "$want" ]] && ok "completion offers the commands: $got" || bad "completion of commands: '$got', expected '$want'"
  got=$(complete_words "$gkc" nr | tr '\n' ' ')
  [[ $got == "nrm2 " ]] && ok "completion of 'nr' is nrm2 (a name with a digit)" || bad "completion of 'nr': '$got'"
  got=$(complete_words "$gkc" nrm2 --c | tr '\n' ' ')
  [[ $got == "--check " ]] && ok "completion of nrm2's --c is --check" || bad "nrm2 --c: '$got'"
  got=$(complete_words "$gkc" t | tr '\n' ' ')
  [[ $got == "top " ]] && ok "completion of 't' is top" || bad "completion of 't': '$got'"
  got=$(complete_words "$gkc" top --it | tr '\n' ' ')
  [[ $got == "--iterations " ]] && ok "completion of top's --it is --iterations" || bad "top --it: '$got'"
  got=$(complete_words "$gkc" sgemm --tr | sort | tr '\n' ' ')
  [[ $got == "--trans-a --trans-b " ]] && ok "completion of sgemm --tr: $got" || bad "sgemm --tr: '$got'"
  got=$(complete_words "$gkc" reduce --op m | sort | tr '\n' ' ')
  [[ $got == "max min " ]] && ok "completion of --op values" || bad "reduce --op m: '$got'"
fi
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
