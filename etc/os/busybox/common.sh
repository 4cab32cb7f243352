# Shared by the busybox OS scripts (sourced, not run).
#
# The busybox OS "installs" an instance by writing a small, recognisable
# record at the start of its first disk: a marker line, the variant, and
# (variant "default") the whole environment the script saw, sorted, ended by
# an END line.  It uses only printf, dd and sort, so it works on plain image
# files as well as block devices, without root-only tools.

MARKER="GANETI-BUSYBOX-OS v1"

die() {
  echo "busybox: $*" >&2
  exit 1
}

check_variant() {
  case "${OS_VARIANT:-}" in
    default|minimal|"") ;;
    *) die "unsupported variant '${OS_VARIANT}' (supported: default, minimal)" ;;
  esac
}

first_disk() {
  [ "${DISK_COUNT:-0}" -ge 1 ] || die "the instance needs at least one disk"
  [ -n "${DISK_0_PATH:-}" ] || die "DISK_0_PATH is not set"
  [ -e "$DISK_0_PATH" ] || die "disk $DISK_0_PATH does not exist"
  echo "$DISK_0_PATH"
}
