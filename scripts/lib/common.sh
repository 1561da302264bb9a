# SPDX-License-Identifier: Apache-2.0
# scripts/lib/common.sh — shared by the project's scripts: package set-up and the build.
# Source it; it defines functions only.

DLOCK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# The Debian packages the build, the tests and the demo need.
DLOCK_PACKAGES=(cmake g++ make pkg-config libhiredis-dev libssl-dev libspdlog-dev doctest-dev
                redis-server redis-sentinel redis-tools openssl python3-prometheus-client)

log() { printf '[dlock] %s\n' "$*" >&2; }

# Installs whichever of the packages (plus any given as arguments) are missing.
ensure_packages() {
  local missing=() pkg
  for pkg in "${DLOCK_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The Debian package starts a system redis-server where an init system runs; we never use it,
  # and tests pick their own ports anyway.
}

# configure_and_build <build-dir> [cmake args...] [--target T...]
# Targets after --target are built alone (a script that runs three programs need not build
# every test suite); without them, everything is.
configure_and_build() {
  local dir="$1"; shift
  local args=() targets=()
  while [ $# -gt 0 ]; do
    if [ "$1" = --target ]; then shift; targets=("$@"); break; fi
    args+=("$1"); shift
  done
  set -- "${args[@]}"
  # Warnings are errors in CI; elsewhere leave the setting as the build folder has it, so the
  # demo and the tests can share a build without rebuilding it from scratch.
  local extra=()
  [ -n "${CI:-}" ] && extra+=(-DDLOCK_WARNINGS_AS_ERRORS=ON)
  # ccache where the machine has it: the normal, sanitizer and fuzz builds of a second run, or of
  # another clone (paths are hashed relative to the tree), compile only what changed.
  if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]; then
    export CCACHE_BASEDIR="$DLOCK_ROOT" CCACHE_NOHASHDIR=true
    extra+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$DLOCK_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="${DLOCK_BUILD_TYPE:-RelWithDebInfo}" \
        "${extra[@]}" "$@" >/dev/null
  if [ ${#targets[@]} -gt 0 ]; then
    cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"
  else
    cmake --build "$dir" -j"$(nproc)"
  fi
}

# The files in the source tree outside git's knowledge, untracked or ignored, one per line as
# `git status --porcelain` shows them; the build folders (build*/) and ccache's .cache/ are the
# only ones a script may make, so they are left out. Nothing outside a git work tree.
stray_files() {
  git -C "$DLOCK_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
  git -C "$DLOCK_ROOT" status --porcelain --ignored=matching --untracked-files=all \
    | grep -E '^(!!|\?\?) ' | grep -Ev '^(!!|\?\?) (build[^/]*/|\.cache/)' || true
}

# files_left_since <stray_files output from before>: the stray files that are new since then.
files_left_since() {
  comm -13 <(printf '%s\n' "$1" | sort) <(stray_files | sort) | sed '/^$/d'
}
