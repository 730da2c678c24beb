#!/usr/bin/env bash
# Installs the Debian packages stacklens needs, only those missing (idempotent).
# MPI (Open MPI + MPICH), the InfiniBand management stack and simulator, Chromium for the
# browser tests, iproute2 for the tests' network namespaces, MUNGE (proven senders across
# nodes; the hooks build against munge.h and load libmunge at run time), pango and fonts
# for WeasyPrint's PDF reports, poppler-utils (pdftotext, pdftoppm) to check them, and the toolchain. Runs
# apt-get update only when something is missing.
set -euo pipefail

packages=(
  build-essential gfortran g++ python3 python3-venv python3-dev
  openmpi-bin libopenmpi-dev mpich libmpich-dev
  ibsim-utils opensm infiniband-diags rdma-core libumad2sim0
  libibumad-dev libibmad-dev libibnetdisc-dev
  chromium chromium-driver
  iproute2
  munge libmunge-dev
  poppler-utils libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core
)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "debian packages: all ${#packages[@]} present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "debian packages: installing ${missing[*]}"
"${sudo[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "${missing[@]}"
