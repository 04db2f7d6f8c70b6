#!/usr/bin/env bash
# setup.sh — install what autotune's build needs on Debian/Ubuntu, then
# configure and build into build/. Works as root (no sudo needed) and as a
# user with sudo. apt is touched only when a package is missing, and then
# `apt-get update` runs once before one `apt-get install`.
#
#   scripts/setup.sh                         install what is missing, build
#   scripts/setup.sh --deps-only [PKG...]    install only (PKG: extra packages; CI adds clang)
#   scripts/setup.sh --dry-run [...]         print what it would do, change nothing
#   scripts/setup.sh --python [...]          also pip-install the Python package's
#                                            dependencies (torch matplotlib pytest)
#
# The CUDA toolkit (nvcc, NVRTC, cuBLAS) is not installed here: it must be
# present already (on PATH, in $CUDA_HOME or /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/setup.sh [--deps-only] [--dry-run] [--python] [EXTRA_PACKAGE...]

Installs the build's packages that are missing (liblua5.4-dev libsqlite3-dev
cmake gcc, plus any EXTRA_PACKAGE), with apt-get as root or through sudo,
then configures and builds autotune into build/ (RelWithDebInfo).

  --deps-only   install packages only; no CUDA check, no build
  --dry-run     print the commands it would run, run none of them
  --python      also install, with python3 -m pip, what the Python package
                (python/) and its tests import and is missing: torch,
                matplotlib, pytest
  --help        this text

Needs Debian or Ubuntu and the CUDA toolkit (nvcc) already installed.
After it: build/autotune --op gemv --shape 1x2048x8192   (needs a GPU)
EOF
}

deps_only=0 dry=0 python=0 extra=()
for a in "$@"; do
  case "$a" in
    --deps-only) deps_only=1 ;;
    --dry-run) dry=1 ;;
    --python) python=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "setup.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
    *) extra+=("$a") ;;
  esac
done

run() { # print the command; run it unless --dry-run
  echo "+ $*"
  [ "$dry" = 1 ] || "$@"
}

# --- packages -----------------------------------------------------------
pkgs=(liblua5.4-dev libsqlite3-dev cmake gcc ${extra[@]+"${extra[@]}"})
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup.sh: no dpkg-query: not Debian/Ubuntu; install these yourself: ${pkgs[*]}" >&2
  [ "$deps_only" = 1 ] && exit 1
else
  need=()
  for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$st" = "install ok installed" ] || need+=("$p")
  done
  if [ ${#need[@]} -eq 0 ]; then
    echo "setup.sh: packages present: ${pkgs[*]}"
  else
    if [ "$(id -u)" = 0 ]; then
      as_root=(env DEBIAN_FRONTEND=noninteractive)
    elif command -v sudo >/dev/null 2>&1; then
      as_root=(sudo env DEBIAN_FRONTEND=noninteractive)
    else
      echo "setup.sh: missing ${need[*]}, and neither root nor sudo to install them" >&2
      exit 1
    fi
    echo "setup.sh: installing ${need[*]}"
    run "${as_root[@]}" apt-get update -qq
    run "${as_root[@]}" apt-get install -y -qq "${need[@]}"
  fi
fi
# --- Python: the package's dependencies, from the package registry -------
if [ "$python" = 1 ]; then
  py=$(command -v python3 || true)
  [ -n "$py" ] || { echo "setup.sh: --python: no python3 on PATH" >&2; exit 1; }
  need=()
  for m in torch matplotlib pytest; do
    "$py" -c "import $m" >/dev/null 2>&1 || need+=("$m")
  done
  if [ ${#need[@]} -eq 0 ]; then
    echo "setup.sh: Python modules present: torch matplotlib pytest"
  else
    echo "setup.sh: pip-installing ${need[*]} into $("$py" -c 'import sys; print(sys.prefix)')"
    run "$py" -m pip install -q --disable-pip-version-check "${need[@]}"
  fi
fi
[ "$deps_only" = 1 ] && exit 0

# --- CUDA toolkit ---------------------------------------------------------
nvcc=$(command -v nvcc || true)
cuda_root=
if [ -z "$nvcc" ]; then
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then nvcc=$d/bin/nvcc; cuda_root=$d; break; fi
  done
fi
if [ -z "$nvcc" ]; then
  cat >&2 <<'EOF'
setup.sh: the CUDA toolkit was not found (no nvcc on PATH, in $CUDA_HOME or
/usr/local/cuda). autotune needs it to build (NVRTC, cuBLAS, headers): install
the CUDA toolkit from NVIDIA (https://developer.nvidia.com/cuda-downloads),
then put its bin/ on PATH or set CUDA_HOME, and run this again.
EOF
  exit 1
fi
echo "setup.sh: CUDA toolkit: $nvcc"

# --- configure and build -------------------------------------------------
cfg=(cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo)
[ -n "$cuda_root" ] && cfg+=("-DCUDAToolkit_ROOT=$cuda_root")
run "${cfg[@]}"
run cmake --build build -j"$(nproc 2>/dev/null || echo 2)"
echo "setup.sh: built build/autotune; tune with: build/autotune --op gemv --shape 1x2048x8192"
