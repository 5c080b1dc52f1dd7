#!/usr/bin/env bash
# Installs what gkc needs to build and test, on Debian or Ubuntu.
# Does nothing when everything is present; otherwise runs apt-get as root
# (directly, or through sudo when not root).
set -euo pipefail

pkgs=(build-essential cmake ninja-build pkg-config libuv1-dev libopenblas-dev zlib1g-dev
      libsystemd-dev gzip python3 python3-msgpack python3-numpy
      python3-scipy python3-pytest python3-pip python3-setuptools
      clang libclang-rt-dev libomp-dev systemd
      libopenmpi-dev openmpi-bin
      libmicrohttpd-dev prometheus help2man man-db groff-base bash-completion dpkg-dev
      gnuplot-nox)

# msgpack-c's development package was renamed after Debian 12.
if apt-cache show libmsgpack-c-dev >/dev/null 2>&1; then
  pkgs+=(libmsgpack-c-dev)
else
  pkgs+=(libmsgpack-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A first look at apt-cache may have found no lists at all: decide again after update.
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: need root to install: ${missing[*]}" >&2
  echo "run: apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
# After the update the renamed msgpack package may have become visible.
if [[ " ${missing[*]} " == *" libmsgpack-dev "* ]] && apt-cache show libmsgpack-c-dev >/dev/null 2>&1; then
  missing=("${missing[@]/libmsgpack-dev/libmsgpack-c-dev}")
fi
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
