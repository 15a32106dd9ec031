#!/usr/bin/env bash
# deps-cuda.sh: install what `make build-cuda` and `make ptx` need from Debian: nvidia-cuda-dev
# (CUDA 11.8's cuda.h and a libcuda.so to link against) and nvidia-cuda-toolkit (nvcc). Both live in
# Debian's non-free component (contrib for some dependencies): add those components to the apt sources
# only where they are missing, then install the packages only where they are missing.
#
# Why 11.8 and not a newer CUDA: gorgonia.org/cu v0.9.6 binds cuCtxCreate, which CUDA 13's cuda.h turns
# into cuCtxCreate_v4 with other arguments. A binary built against 11.8 runs on newer drivers.
set -euo pipefail
pkgs=(nvidia-cuda-dev nvidia-cuda-toolkit)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo

# Add "contrib non-free" to every Debian source that lacks them: the deb822 file (bookworm and later) or
# the one-line sources.list.
added=0
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [[ -f $f ]] || continue
  if [[ $f == *.sources ]]; then
    if grep -qE '^Components:' "$f" && grep -E '^Components:' "$f" | grep -qvE '\bnon-free\b'; then
      $sudo sed -i -E '/^Components:/{/\bnon-free\b/!s/$/ contrib non-free/}' "$f"; added=1
    fi
  else
    if grep -qE '^deb .*debian' "$f" && grep -E '^deb .*debian' "$f" | grep -qvE '\bnon-free\b'; then
      $sudo sed -i -E '/^deb .*debian/{/\bnon-free\b/!s/$/ contrib non-free/}' "$f"; added=1
    fi
  fi
done
((added)) && echo "deps-cuda: added contrib non-free to the apt sources"

apt="$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends"
echo "deps-cuda: installing ${missing[*]} (about 3 GB unpacked)"
if ((added)) || ! $apt install "${missing[@]}"; then
  $apt update && $apt install "${missing[@]}"
fi
