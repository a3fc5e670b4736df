# Sourced by the scripts/ensure-* scripts.
# `apt_install WHAT PACKAGE...`: installs Debian's PACKAGEs when this machine allows it (apt-get,
# as root or with passwordless sudo), saying so on stderr as WHAT. Returns 1 when it cannot try;
# the caller checks again for what it needs and otherwise says exactly what to do.
apt_install() {
  local what=$1 install_cmd=""
  shift
  command -v apt-get >/dev/null 2>&1 || return 1
  if [ "$(id -u)" -eq 0 ]; then
    install_cmd="apt-get"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    install_cmd="sudo apt-get"
  else
    return 1
  fi
  echo "$what is missing; installing Debian's $* package..." >&2
  export DEBIAN_FRONTEND=noninteractive
  $install_cmd update -qq >/dev/null || true
  $install_cmd install -y -qq "$@" >/dev/null
}
