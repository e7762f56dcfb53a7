# Sourced by the benchmark scripts: the transports they compare, by the names of
# ../shared/research/baselines.md, as "MPI scripts/mpirun-diwarp-transport".
#   mpich-diwarp      MPICH ch4:ofi, FI_PROVIDER=diwarp
#   mpich-tcp         MPICH, FI_PROVIDER=tcp: libfabric 2.x's native tcp RDM provider
#   mpich-tcp-rxm     MPICH, FI_PROVIDER="tcp;ofi_rxm"
#   mpich-udp-rxd     MPICH, FI_PROVIDER="udp;ofi_rxd"
#   ompi-btl-tcp      Open MPI, --mca pml ob1 --mca btl tcp,self
#   ompi-diwarp       Open MPI, pml cm + mtl ofi, provider diwarp
#   ompi-mtl-ofi-tcp  Open MPI, pml cm + mtl ofi, "tcp;ofi_rxm" (libfabric 1.17)
declare -A tdef=(
  [mpich-diwarp]="mpich diwarp"
  [mpich-tcp]="mpich tcp"
  [mpich-tcp-rxm]="mpich tcp-rxm"
  [mpich-udp-rxd]="mpich udp-rxd"
  [ompi-btl-tcp]="openmpi ompi-tcp"
  [ompi-diwarp]="openmpi diwarp"
  [ompi-mtl-ofi-tcp]="openmpi tcp"
)

# The C compiler wrapper of an MPI (mpich: the venv's wheel; openmpi: Debian's).
mpicc_of() {
  case $1 in
    mpich) echo "${MPICC_MPICH:-$here/.venv/bin/mpicc}" ;;
    openmpi) echo "${MPICC_OPENMPI:-$(command -v mpicc.openmpi || echo mpicc.openmpi)}" ;;
  esac
}
